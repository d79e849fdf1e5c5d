# Build conventions shared by the core, plugins, tools and tests.

find_package(PkgConfig REQUIRED)
find_package(Threads REQUIRED)
pkg_check_modules(INIH REQUIRED IMPORTED_TARGET inih)
pkg_check_modules(CJSON REQUIRED IMPORTED_TARGET libcjson)
pkg_check_modules(PCRE2 REQUIRED IMPORTED_TARGET libpcre2-8)

# Warnings everywhere; -Werror when asked (CI asks).
set(TF_WARNINGS -Wall -Wextra -Wshadow -Wstrict-prototypes -Wmissing-prototypes
    -Wno-unused-parameter -Wvla)
if(TF_WERROR)
  list(APPEND TF_WARNINGS -Werror)
endif()
add_compile_options("$<$<COMPILE_LANGUAGE:C>:${TF_WARNINGS}>")

if(TF_SANITIZE)
  add_compile_options(-fsanitize=${TF_SANITIZE} -fno-omit-frame-pointer)
  add_link_options(-fsanitize=${TF_SANITIZE})
endif()

# The SIMD path is chosen at build time; the scalar path is always compiled
# as the reference.  TF_SIMD_FLAGS go on the files holding vector kernels.
if(TF_SIMD STREQUAL "auto")
  if(CMAKE_SYSTEM_PROCESSOR MATCHES "x86_64|AMD64")
    set(TF_SIMD "avx2")
  elseif(CMAKE_SYSTEM_PROCESSOR MATCHES "aarch64|arm64")
    set(TF_SIMD "neon")
  else()
    set(TF_SIMD "scalar")
  endif()
endif()
if(TF_SIMD STREQUAL "avx2")
  set(TF_SIMD_FLAGS -mavx2 -mfma -mf16c)
  set(TF_SIMD_DEFS TF_SIMD_AVX2=1)
elseif(TF_SIMD STREQUAL "neon")
  set(TF_SIMD_FLAGS "")
  set(TF_SIMD_DEFS TF_SIMD_NEON=1)
else()
  set(TF_SIMD_FLAGS "")
  set(TF_SIMD_DEFS TF_SIMD_SCALAR=1)
endif()
message(STATUS "TensorFold CPU kernels: ${TF_SIMD}")

# CUDA is optional: plugins with .cu files build only when nvcc is found.
include(CheckLanguage)
check_language(CUDA)
if(CMAKE_CUDA_COMPILER)
  if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
    set(CMAKE_CUDA_ARCHITECTURES 90 121)
  endif()
  enable_language(CUDA)
  set(TF_HAVE_CUDA ON)
else()
  set(TF_HAVE_CUDA OFF)
  message(STATUS "nvcc not found: CUDA plugins are skipped")
endif()

# tf_add_plugin(<name> SOURCES ... [LIBS ...])
# Builds plugins/<name>.so into ${TF_OUT_PLUGINS}.  Plugins see only the
# public headers and export only their TF_EXPORT entry functions.
function(tf_add_plugin name)
  cmake_parse_arguments(P "" "" "SOURCES;LIBS" ${ARGN})
  add_library(${name} MODULE ${P_SOURCES})
  set_target_properties(${name} PROPERTIES
    PREFIX "" OUTPUT_NAME ${name}
    LIBRARY_OUTPUT_DIRECTORY ${TF_OUT_PLUGINS}
    C_VISIBILITY_PRESET hidden CUDA_VISIBILITY_PRESET hidden)
  target_include_directories(${name} PRIVATE ${CMAKE_SOURCE_DIR}/core/include)
  target_link_libraries(${name} PRIVATE ${P_LIBS} m)
endfunction()
