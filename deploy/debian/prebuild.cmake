# deploy/debian/prebuild.cmake - a CPack pre-build script (package.cmake),
# run on the staged files before they are packed:
#  - the binary's RUNPATH names the private librdkafka (/usr/lib/outboxd)
#    instead of the build machine's prefix (CPACK_OUTBOXD_OLD_RPATH; unset
#    when outboxd links Debian's librdkafka1);
#  - the binary and the library are stripped as Debian strips (no debug
#    information, no .comment and .note sections): the build is
#    RelWithDebInfo, and no -dbgsym package is made.
file(GLOB_RECURSE outboxd_staged "${CPACK_TEMPORARY_DIRECTORY}/*")
set(outboxd_bins ${outboxd_staged})
list(FILTER outboxd_bins INCLUDE REGEX "/usr/bin/outboxd$")
if(NOT outboxd_bins)
  message(FATAL_ERROR "prebuild.cmake: no usr/bin/outboxd under ${CPACK_TEMPORARY_DIRECTORY}")
endif()
set(outboxd_libs ${outboxd_staged})
list(FILTER outboxd_libs INCLUDE REGEX "/usr/lib/outboxd/[^/]*\\.so[.0-9]*$")
foreach(bin ${outboxd_bins})
  if(CPACK_OUTBOXD_OLD_RPATH)
    file(RPATH_CHANGE FILE "${bin}" OLD_RPATH "${CPACK_OUTBOXD_OLD_RPATH}"
         NEW_RPATH "/usr/lib/outboxd")
  endif()
  execute_process(COMMAND strip --remove-section=.comment --remove-section=.note "${bin}"
                  COMMAND_ERROR_IS_FATAL ANY)
endforeach()
foreach(lib ${outboxd_libs})
  execute_process(COMMAND strip --strip-unneeded --remove-section=.comment
                          --remove-section=.note "${lib}" COMMAND_ERROR_IS_FATAL ANY)
endforeach()
