# TestData.cmake - the data the tests and benchmarks read (tests/testdata),
# copied into <build>/testdata at configure time with its large files
# unpacked from their .tar.xz, every file checked against the SHA256SUMS
# beside it.  TF_TESTDATA names the folder; set it to use another copy.
set(TF_TESTDATA "" CACHE PATH
    "A folder laid out as tests/testdata to read instead of the tree's")

# Checks every file named in each SHA256SUMS under dir; stops the configure
# naming the first that is missing or differs.
function(tf_testdata_verify dir)
  file(GLOB_RECURSE _sums ${dir}/SHA256SUMS)
  foreach(_s IN LISTS _sums)
    get_filename_component(_d ${_s} DIRECTORY)
    file(STRINGS ${_s} _lines)
    foreach(_l IN LISTS _lines)
      if(NOT _l MATCHES "^([0-9a-f]+)  (.+)$")
        message(FATAL_ERROR "${_s}: not a sha256sum line: ${_l}")
      endif()
      set(_want ${CMAKE_MATCH_1})
      set(_f ${_d}/${CMAKE_MATCH_2})
      if(NOT EXISTS ${_f})
        message(FATAL_ERROR "${_f}: missing (listed in ${_s})")
      endif()
      file(SHA256 ${_f} _got)
      if(NOT _got STREQUAL _want)
        message(FATAL_ERROR "${_f}: sha256 ${_got}, ${_s} says ${_want}")
      endif()
    endforeach()
  endforeach()
endfunction()

# Set, the cache entry names the folder; empty, a normal variable of the same
# name (which hides the cache entry) names the build's copy.
if(TF_TESTDATA)
  tf_testdata_verify(${TF_TESTDATA})
else()
  set(_src ${CMAKE_SOURCE_DIR}/tests/testdata)
  set(TF_TESTDATA ${CMAKE_BINARY_DIR}/testdata)
  file(GLOB_RECURSE _files RELATIVE ${_src} ${_src}/*)
  foreach(_f IN LISTS _files)
    if(_f MATCHES "\\.tar\\.xz$")
      # unpacked again only when the archive changes
      get_filename_component(_d ${_f} DIRECTORY)
      set(_stamp ${TF_TESTDATA}/${_f}.unpacked)
      if(NOT EXISTS ${_stamp} OR ${_src}/${_f} IS_NEWER_THAN ${_stamp})
        file(ARCHIVE_EXTRACT INPUT ${_src}/${_f} DESTINATION ${TF_TESTDATA}/${_d})
        file(TOUCH ${_stamp})
      endif()
      set_property(DIRECTORY ${CMAKE_SOURCE_DIR} APPEND PROPERTY
                   CMAKE_CONFIGURE_DEPENDS ${_src}/${_f})
    else()
      configure_file(${_src}/${_f} ${TF_TESTDATA}/${_f} COPYONLY)
    endif()
  endforeach()
  tf_testdata_verify(${TF_TESTDATA})
endif()
