# Run by `cmake --install` and cpack (install(SCRIPT), after the MSCHED_UNIT_*
# variables are set): writes mschedd@.service with the absolute paths of this
# install and installs it (DESTDIR and the manifest handled by file(INSTALL)).
function(msched_install_path out dir)
  if(IS_ABSOLUTE "${dir}")
    set(${out} "${dir}" PARENT_SCOPE)
  else()
    set(${out} "${CMAKE_INSTALL_PREFIX}/${dir}" PARENT_SCOPE)
  endif()
endfunction()

msched_install_path(MSCHED_BINDIR "${MSCHED_UNIT_BINDIR}")
msched_install_path(MSCHED_DOCDIR "${MSCHED_UNIT_DOCDIR}")
msched_install_path(destination "${MSCHED_UNIT_DESTINATION}")
# One staging file per destination: installs into different prefixes may run
# at once (the tests do), and must not take each other's unit.
string(MD5 key "$ENV{DESTDIR}${destination}")
set(staged "${MSCHED_UNIT_STAGING}/${key}/mschedd@.service")
configure_file("${MSCHED_UNIT_IN}" "${staged}" @ONLY)
file(INSTALL DESTINATION "${destination}" TYPE FILE FILES "${staged}")
