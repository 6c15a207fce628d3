# Compiler settings shared by every msched target.
#   msched_set_warnings(target): -Wall -Wextra and friends, -Werror under MSCHED_WERROR.
#   msched_set_sanitizers(target): ASan + UBSan under MSCHED_SANITIZE; TSan
#     under MSCHED_TSAN; under MSCHED_FUZZ, libFuzzer's coverage
#     (fuzzer-no-link) with ASan + UBSan.

function(msched_set_warnings target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wnon-virtual-dtor -Wimplicit-fallthrough
                                           $<$<CXX_COMPILER_ID:GNU>:-Wshadow=local>)
  if(MSCHED_WERROR)
    target_compile_options(${target} PRIVATE -Werror)
  endif()
endfunction()

function(msched_set_sanitizers target)
  if(MSCHED_SANITIZE)
    target_compile_options(${target} PRIVATE -fsanitize=address,undefined -fno-omit-frame-pointer
                                             -fno-sanitize-recover=undefined)
    target_link_options(${target} PRIVATE -fsanitize=address,undefined)
  elseif(MSCHED_TSAN)
    target_compile_options(${target} PRIVATE -fsanitize=thread -fno-omit-frame-pointer)
    target_link_options(${target} PRIVATE -fsanitize=thread)
  elseif(MSCHED_FUZZ)
    target_compile_options(${target} PRIVATE -fsanitize=fuzzer-no-link,address,undefined -fno-omit-frame-pointer
                                             -fno-sanitize-recover=undefined)
    target_link_options(${target} PRIVATE -fsanitize=address,undefined)
  endif()
endfunction()
