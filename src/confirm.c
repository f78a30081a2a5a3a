/*
 * confirm.c - the position outboxd may confirm (see confirm.h).
 */
#include "confirm.h"

lsn_t confirm_position(lsn_t acked, bool capped, lsn_t proven, lsn_t floor)
{
    lsn_t pos = capped && proven < acked ? proven : acked;
    return pos < floor ? floor : pos;
}
