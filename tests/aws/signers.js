// tests/aws/signers.js - the MSK and RDS IAM auth tokens as AWS's own code
// signs them (npm aws-msk-iam-sasl-signer-js, @aws-sdk/rds-signer), at a
// fixed clock, for tests/aws/signers.sh to compare with outboxd's
// (tests/awssign.c) byte for byte.
//
//   node signers.js NOW REGION ACCESS_KEY_ID SECRET TOKEN|- EXPIRES|0 HOST PORT USER
//
// prints "msk TOKEN EXPIRY_S" and "rds TOKEN". NOW and EXPIRES are seconds
// since the epoch. The clock is fixed by replacing Date (neither signer
// takes a signing date: both call `new Date()` and Date.now()).
"use strict";
const [now, region, akid, secret, token, expires, host, port, user] = process.argv.slice(2);
const FIXED = Number(now) * 1000;
const RealDate = Date;
class FixedDate extends RealDate {
  constructor(...a) {
    if (a.length === 0) super(FIXED);
    else super(...a);
  }
  static now() {
    return FIXED;
  }
}
global.Date = FixedDate;

const { generateAuthTokenFromCredentialsProvider } = require("aws-msk-iam-sasl-signer-js");
const { Signer } = require("@aws-sdk/rds-signer");

const creds = { accessKeyId: akid, secretAccessKey: secret };
if (token !== "-") creds.sessionToken = token;
if (Number(expires) > 0) creds.expiration = new RealDate(Number(expires) * 1000);

(async () => {
  const msk = await generateAuthTokenFromCredentialsProvider({
    region,
    awsCredentialsProvider: async () => creds,
  });
  console.log(`msk ${msk.token} ${msk.expiryTime / 1000}`);
  const signer = new Signer({ region, hostname: host, port: Number(port), username: user, credentials: creds });
  console.log(`rds ${await signer.getAuthToken()}`);
})().catch((e) => {
  console.error(`signers.js: ${e && e.stack ? e.stack : e}`);
  process.exit(1);
});
