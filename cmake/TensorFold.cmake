# Build conventions shared by the core, plugins, tools and tests.

# A build of only the self-tests (scripts/cross-test.sh: for aarch64, or
# natively with TF_SIMD=scalar) builds no core, tools or Criterion tests,
# so it needs none of their libraries for the target: only the plugins'
# self-test programs are built and run.
if(TF_SELFTESTS AND NOT TF_BUILD_TESTS)
  set(TF_SELFTEST_ONLY ON)
else()
  set(TF_SELFTEST_ONLY OFF)
endif()

find_package(Threads REQUIRED)
if(NOT TF_SELFTEST_ONLY)
  find_package(PkgConfig REQUIRED)
  pkg_check_modules(INIH REQUIRED IMPORTED_TARGET inih)
  pkg_check_modules(CJSON REQUIRED IMPORTED_TARGET libcjson)
  pkg_check_modules(PCRE2 REQUIRED IMPORTED_TARGET libpcre2-8)
  pkg_check_modules(MHD REQUIRED IMPORTED_TARGET libmicrohttpd)
endif()

# Warnings everywhere; -Werror when asked (CI asks).
set(TF_WARNINGS -Wall -Wextra -Wshadow -Wstrict-prototypes -Wmissing-prototypes
    -Wno-unused-parameter -Wvla)
if(TF_WERROR)
  list(APPEND TF_WARNINGS -Werror)
endif()
add_compile_options("$<$<COMPILE_LANGUAGE:C>:${TF_WARNINGS}>")

if(TF_SANITIZE)
  add_compile_options("$<$<COMPILE_LANGUAGE:C>:-fsanitize=${TF_SANITIZE};-fno-omit-frame-pointer>")
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
if(NOT TF_SELFTEST_ONLY AND TF_CUDA)
  check_language(CUDA)
endif()
if(CMAKE_CUDA_COMPILER AND TF_CUDA AND NOT TF_SELFTEST_ONLY)
  if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
    set(CMAKE_CUDA_ARCHITECTURES 90 121)
  endif()
  enable_language(CUDA)
  set(TF_HAVE_CUDA ON)
elseif(TF_SELFTEST_ONLY)
  set(TF_HAVE_CUDA OFF)
  message(STATUS "self-tests only: CUDA plugins are skipped")
elseif(NOT TF_CUDA)
  set(TF_HAVE_CUDA OFF)
  message(STATUS "TF_CUDA=OFF: CUDA plugins are skipped")
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

# tf_add_plugin_library(<name> SOURCES ... [LIBS ...])
# A static library of C code that several plugins share (the CPU and the
# CUDA plugin of one layer type): position-independent and hidden, as the
# plugins that link it; its folder and the public headers its includes.
function(tf_add_plugin_library name)
  cmake_parse_arguments(L "" "" "SOURCES;LIBS" ${ARGN})
  add_library(${name} STATIC ${L_SOURCES})
  target_include_directories(${name} PUBLIC ${CMAKE_CURRENT_SOURCE_DIR}
    ${CMAKE_SOURCE_DIR}/core/include)
  set_target_properties(${name} PROPERTIES POSITION_INDEPENDENT_CODE ON
    C_VISIBILITY_PRESET hidden)
  target_link_libraries(${name} PUBLIC ${L_LIBS} m)
endfunction()

# tf_add_selftest(<name> SOURCES ... [LIBS ...])
# A plain-C self-test program: no Criterion, so it also links statically
# for a cross target and runs under CMAKE_CROSSCOMPILING_EMULATOR (qemu).
# It prints "N passed, N failed" last and exits non-zero on a failure.
# It sees the public headers and TF_SIMD_DEFS; the caller puts
# TF_SIMD_FLAGS on whichever of its sources hold vector code.  The
# `selftests` target builds every one.
if(TF_BUILD_TESTS OR TF_SELFTESTS)
  add_custom_target(selftests)
endif()
function(tf_add_selftest name)
  if(NOT (TF_BUILD_TESTS OR TF_SELFTESTS))
    return()
  endif()
  cmake_parse_arguments(S "" "" "SOURCES;LIBS" ${ARGN})
  add_executable(${name} ${S_SOURCES})
  target_include_directories(${name} PRIVATE ${CMAKE_SOURCE_DIR}/core/include)
  target_compile_definitions(${name} PRIVATE ${TF_SIMD_DEFS})
  target_link_libraries(${name} PRIVATE ${S_LIBS} m)
  set_target_properties(${name} PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests)
  add_test(NAME ${name} COMMAND ${name})
  add_dependencies(selftests ${name})
endfunction()
