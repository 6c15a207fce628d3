# Compiler settings shared by every msched target.
#   msched_set_warnings(target): -Wall -Wextra and friends, -Werror under MSCHED_WERROR.
#   msched_set_sanitizers(target): ASan + UBSan under MSCHED_SANITIZE.

function(msched_set_warnings target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wshadow=local -Wnon-virtual-dtor
                                           -Wimplicit-fallthrough)
  if(MSCHED_WERROR)
    target_compile_options(${target} PRIVATE -Werror)
  endif()
endfunction()

function(msched_set_sanitizers target)
  if(MSCHED_SANITIZE)
    target_compile_options(${target} PRIVATE -fsanitize=address,undefined -fno-omit-frame-pointer
                                             -fno-sanitize-recover=undefined)
    target_link_options(${target} PRIVATE -fsanitize=address,undefined)
  endif()
endfunction()
