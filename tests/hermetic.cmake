# Run by ctest (a TEST_INCLUDE_FILES entry, see tests/CMakeLists.txt) once
# the tests of a directory are defined: gives each test named in
# ${TRL_HERMETIC_LIST} its own fresh HOME, TMPDIR and TEST_TMPDIR (where
# GoogleTest's TempDir() points), so that no test reads or creates the real
# ~/.trl/token or writes in the real $TMPDIR. They are made under
# $TRL_TEST_SCRATCH (scripts/test.sh: a new directory per run, removed
# after it) or else under BUILD/test-scratch/run-RANDOM (one per ctest run;
# runs older than a day are removed). TRL_STATUS_PORT=0: a coordinator's
# status page takes a port the kernel picks (outside FreePort's range),
# never main_process_port + 1, which another test may have reserved.
# (Tests of the status page pass --status_port themselves.)
if(DEFINED ENV{TRL_TEST_SCRATCH} AND NOT "$ENV{TRL_TEST_SCRATCH}" STREQUAL "")
  set(_trl_root "$ENV{TRL_TEST_SCRATCH}")
else()
  if(NOT DEFINED TRL_HERMETIC_RUN)
    set(_trl_base "${TRL_HERMETIC_BUILD_DIR}/test-scratch")
    string(TIMESTAMP _trl_now "%s" UTC)
    file(GLOB _trl_runs LIST_DIRECTORIES true "${_trl_base}/run-*")
    foreach(_trl_run IN LISTS _trl_runs)
      file(TIMESTAMP "${_trl_run}" _trl_then "%s" UTC)
      math(EXPR _trl_age "${_trl_now} - ${_trl_then}")
      if(_trl_age GREATER 86400)
        file(REMOVE_RECURSE "${_trl_run}")
      endif()
    endforeach()
    string(RANDOM LENGTH 10 _trl_random)
    set(TRL_HERMETIC_RUN "${_trl_base}/run-${_trl_now}-${_trl_random}")
  endif()
  set(_trl_root "${TRL_HERMETIC_RUN}")
endif()
foreach(_trl_test IN LISTS ${TRL_HERMETIC_LIST})
  string(MAKE_C_IDENTIFIER "${_trl_test}" _trl_id)
  string(SUBSTRING "${_trl_id}" 0 80 _trl_id)
  string(MD5 _trl_hash "${_trl_test}")
  string(SUBSTRING "${_trl_hash}" 0 8 _trl_hash)
  set(_trl_dir "${_trl_root}/${_trl_id}-${_trl_hash}")
  file(MAKE_DIRECTORY "${_trl_dir}/home" "${_trl_dir}/tmp")
  set_tests_properties("${_trl_test}" PROPERTIES ENVIRONMENT
    "HOME=${_trl_dir}/home;TMPDIR=${_trl_dir}/tmp;TEST_TMPDIR=${_trl_dir}/tmp;TRL_STATUS_PORT=0")
endforeach()
