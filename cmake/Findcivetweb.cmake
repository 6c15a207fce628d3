# Finds civetweb (Debian: libcivetweb-dev), the HTTP server behind mschedd
# --metrics, as the imported target civetweb::civetweb.
# Debian's civetweb-config.cmake cannot be used: it also exports the
# civetweb program (civetweb::server), which that package does not ship, and
# fails any find_package() without it. The header and the library suffice.
find_path(civetweb_INCLUDE_DIR civetweb.h)
find_library(civetweb_LIBRARY civetweb)
include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(civetweb REQUIRED_VARS civetweb_LIBRARY civetweb_INCLUDE_DIR)
if(civetweb_FOUND AND NOT TARGET civetweb::civetweb)
  add_library(civetweb::civetweb UNKNOWN IMPORTED)
  set_target_properties(civetweb::civetweb PROPERTIES
    IMPORTED_LOCATION "${civetweb_LIBRARY}"
    INTERFACE_INCLUDE_DIRECTORIES "${civetweb_INCLUDE_DIR}")
endif()
mark_as_advanced(civetweb_INCLUDE_DIR civetweb_LIBRARY)
