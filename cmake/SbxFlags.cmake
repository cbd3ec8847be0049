# Compiler flags: the warning set every target uses, and the ASan+UBSan option.
set(SBX_WARNING_FLAGS -Wall -Wextra -Wshadow -Wconversion -Wno-sign-conversion
    -Wstrict-prototypes -Wmissing-prototypes -Wformat=2 -Wundef)
if(SBX_WERROR)
  list(APPEND SBX_WARNING_FLAGS -Werror)
endif()
add_compile_definitions(_GNU_SOURCE)
add_compile_options(${SBX_WARNING_FLAGS} -fstack-protector-strong -D_FORTIFY_SOURCE=2)

set(SBX_SANITIZE_FLAGS -fsanitize=address,undefined -fno-sanitize-recover=all
    -fno-omit-frame-pointer)
if(SBX_SANITIZE)
  add_compile_options(${SBX_SANITIZE_FLAGS})
  add_link_options(-fsanitize=address,undefined)
endif()

# The static agent cannot carry the sanitizer runtimes: a directory calls this to build
# without them (valgrind covers the agent instead).
function(sbx_no_sanitize_directory)
  get_directory_property(opts COMPILE_OPTIONS)
  list(REMOVE_ITEM opts ${SBX_SANITIZE_FLAGS})
  set_directory_properties(PROPERTIES COMPILE_OPTIONS "${opts}")
  get_directory_property(lopts LINK_OPTIONS)
  list(REMOVE_ITEM lopts -fsanitize=address,undefined)
  set_directory_properties(PROPERTIES LINK_OPTIONS "${lopts}")
endfunction()

# Adds each listed subdirectory that exists and has a CMakeLists.txt.
function(sbx_add_subdirectories)
  foreach(dir ${ARGN})
    if(EXISTS ${CMAKE_CURRENT_SOURCE_DIR}/${dir}/CMakeLists.txt)
      add_subdirectory(${dir})
    endif()
  endforeach()
endfunction()

# Adds every child of `parent` that has a CMakeLists.txt (sorted, so builds are reproducible).
function(sbx_add_subdirectories_glob parent)
  file(GLOB children RELATIVE ${CMAKE_CURRENT_SOURCE_DIR}/${parent}
       ${CMAKE_CURRENT_SOURCE_DIR}/${parent}/*)
  list(SORT children)
  foreach(child ${children})
    if(EXISTS ${CMAKE_CURRENT_SOURCE_DIR}/${parent}/${child}/CMakeLists.txt)
      add_subdirectory(${parent}/${child})
    endif()
  endforeach()
endfunction()
