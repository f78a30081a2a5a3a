# deploy/debian/package.cmake - the Debian package, built by CPack:
#   cmake -S . -B build && cmake --build build && cpack --config build/CPackConfig.cmake
# gives outboxd_<version>_amd64.deb (deploy/deploying.md, "Debian package").
#
# The package holds the install components "runtime" (the binary, the SQL
# files, the example configuration) and "deb", which `cmake --install`
# leaves out: the unit as a system user runs it, /etc/outboxd's conffiles,
# the manual page, the copyright and changelog files, and the librdkafka
# release outboxd is built with, as a private copy in /usr/lib/outboxd.
# Why a private copy: Debian 12's librdkafka1 is 2.0.2, and outboxd is
# built, patched (deploy/librdkafka.sh) and tested on the pinned release;
# replacing the system's librdkafka1 would change it for every other
# program, and no Debian 12 package ships the pinned one. With
# OUTBOXD_RDKAFKA=system the package instead depends on Debian's
# librdkafka1 (dpkg-shlibdeps).

set(outboxd_deb_dir ${CMAKE_SOURCE_DIR}/deploy/debian)

# The unit as the package runs it: the system user outboxd (made by
# postinst) instead of DynamicUser=, ExecStart naming /usr/bin/outboxd.
file(READ ${CMAKE_SOURCE_DIR}/deploy/outboxd.service outboxd_unit)
string(REPLACE "/usr/local/bin/outboxd" "/usr/bin/outboxd" outboxd_unit "${outboxd_unit}")
string(REPLACE "DynamicUser=yes" "User=outboxd\nGroup=outboxd" outboxd_unit "${outboxd_unit}")
string(REPLACE "[Unit]\n" "[Unit]\nDocumentation=man:outboxd(8)\n" outboxd_unit "${outboxd_unit}")
file(WRITE ${CMAKE_BINARY_DIR}/deb/outboxd.service "${outboxd_unit}")
install(FILES ${CMAKE_BINARY_DIR}/deb/outboxd.service DESTINATION /lib/systemd/system
        COMPONENT deb EXCLUDE_FROM_ALL)

install(FILES ${outboxd_deb_dir}/outboxd.ini DESTINATION /etc/outboxd
        PERMISSIONS OWNER_READ OWNER_WRITE GROUP_READ WORLD_READ COMPONENT deb EXCLUDE_FROM_ALL)
install(FILES ${outboxd_deb_dir}/outboxd.env DESTINATION /etc/outboxd
        PERMISSIONS OWNER_READ OWNER_WRITE COMPONENT deb EXCLUDE_FROM_ALL)

# Manual page and the files Debian policy wants in /usr/share/doc, gzipped
# with -n (no name or time stamp: the same bytes every build).
file(MAKE_DIRECTORY ${CMAKE_BINARY_DIR}/deb)
add_custom_command(OUTPUT ${CMAKE_BINARY_DIR}/deb/outboxd.8.gz
  COMMAND gzip -9n -c ${outboxd_deb_dir}/outboxd.8 > ${CMAKE_BINARY_DIR}/deb/outboxd.8.gz
  DEPENDS ${outboxd_deb_dir}/outboxd.8)
add_custom_command(OUTPUT ${CMAKE_BINARY_DIR}/deb/changelog.Debian.gz
  COMMAND gzip -9n -c ${outboxd_deb_dir}/changelog > ${CMAKE_BINARY_DIR}/deb/changelog.Debian.gz
  DEPENDS ${outboxd_deb_dir}/changelog)
add_custom_target(outboxd_deb_docs ALL DEPENDS ${CMAKE_BINARY_DIR}/deb/outboxd.8.gz
                                               ${CMAKE_BINARY_DIR}/deb/changelog.Debian.gz)
install(FILES ${CMAKE_BINARY_DIR}/deb/outboxd.8.gz DESTINATION share/man/man8
        COMPONENT deb EXCLUDE_FROM_ALL)
install(FILES ${CMAKE_BINARY_DIR}/deb/changelog.Debian.gz ${outboxd_deb_dir}/copyright
        DESTINATION share/doc/outboxd COMPONENT deb EXCLUDE_FROM_ALL)
# The tags lintian still reports, each with the reason it stays.
install(FILES ${outboxd_deb_dir}/lintian-overrides DESTINATION share/lintian/overrides
        RENAME outboxd COMPONENT deb EXCLUDE_FROM_ALL)

if(outboxd_rdkafka_prefix)
  install(FILES ${outboxd_rdkafka_prefix}/lib/librdkafka.so.1 DESTINATION lib/outboxd
          PERMISSIONS OWNER_READ OWNER_WRITE GROUP_READ WORLD_READ
          COMPONENT deb EXCLUDE_FROM_ALL)
  set(CPACK_OUTBOXD_OLD_RPATH "${outboxd_rdkafka_prefix}/lib")
endif()
# After the staging install: the binary's RUNPATH names the private copy
# instead of the build machine's prefix, and everything is stripped
# (deploy/debian/prebuild.cmake).
set(CPACK_PRE_BUILD_SCRIPTS ${outboxd_deb_dir}/prebuild.cmake)

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME outboxd)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_GROUPING ALL_COMPONENTS_IN_ONE)
set(CPACK_COMPONENTS_ALL runtime deb)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_NAME outboxd)
set(CPACK_DEBIAN_PACKAGE_RELEASE 1)
set(CPACK_DEBIAN_PACKAGE_MAINTAINER "outboxd maintainers <outboxd@example.org>")
set(CPACK_DEBIAN_PACKAGE_SECTION net)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "transactional outbox relay from PostgreSQL to Kafka")
set(CPACK_DEBIAN_PACKAGE_DESCRIPTION "outboxd tails a logical replication slot (pgoutput or wal2json), takes the
committed INSERTs into an outbox table and produces each event to Kafka,
keyed by its aggregate id, confirming the slot only after the broker has
acknowledged every event at or below it: a crash, a broker outage or a
database restart re-delivers from the stored position and loses nothing.
A polling mode serves databases without logical replication.")
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_DEPENDS "adduser")
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA
    ${outboxd_deb_dir}/conffiles ${outboxd_deb_dir}/postinst
    ${outboxd_deb_dir}/prerm ${outboxd_deb_dir}/postrm)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION TRUE)
include(CPack)
