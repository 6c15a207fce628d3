# Where an install puts msched's pieces (GNUInstallDirs, under any prefix),
# and the paths between them that the programs and libmsched.so compile in:
# each finds the next relative to its own file, so an installed tree works
# wherever it is installed, copied or unpacked. Included before the
# subdirectories that compile the paths in; packaging/CMakeLists.txt installs.
include(GNUInstallDirs)

# libmsched.so is only ever preloaded by path, never linked: a private
# directory keeps it off the dynamic linker's search path.
set(MSCHED_INSTALL_LIBDIR ${CMAKE_INSTALL_LIBDIR}/msched)
set(MSCHED_INSTALL_DATADIR ${CMAKE_INSTALL_DATADIR}/msched)  # templates/, bench/
# Below the prefix, not LIBDIR: systemd reads units and sysusers.d from
# <prefix>/lib whatever the multiarch library directory is.
set(MSCHED_INSTALL_SYSTEMD_UNITDIR lib/systemd/system CACHE STRING "Where mschedd@.service is installed, under the prefix")
set(MSCHED_INSTALL_SYSUSERSDIR lib/sysusers.d CACHE STRING "Where msched's sysusers.d file is installed, under the prefix")

# From the directory of one installed piece to another, for a prefix-free
# lookup (the FULL forms honour an absolute CMAKE_INSTALL_*DIR).
file(RELATIVE_PATH MSCHED_LIBDIR_FROM_BINDIR ${CMAKE_INSTALL_FULL_BINDIR} ${CMAKE_INSTALL_FULL_LIBDIR}/msched)
file(RELATIVE_PATH MSCHED_DATADIR_FROM_BINDIR ${CMAKE_INSTALL_FULL_BINDIR} ${CMAKE_INSTALL_FULL_DATADIR}/msched)
file(RELATIVE_PATH MSCHED_TEMPLATES_FROM_LIBDIR ${CMAKE_INSTALL_FULL_LIBDIR}/msched
     ${CMAKE_INSTALL_FULL_DATADIR}/msched/templates)
