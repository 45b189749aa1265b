# The floors (docs/architecture.md) are enforced twice:
# - check_floors: scripts/check_floors.py fails on any #include that points up
#   or sideways, relative paths included;
# - floors_*: a probe file that includes a higher or sibling floor's header
#   is compiled with a floor library's own INCLUDE_DIRECTORIES (read from the
#   target, so a CMake change that lets an upward include through fails here)
#   and must fail with "not found"; a control including core's header must
#   compile with every floor's directories.
find_package(Python3 COMPONENTS Interpreter QUIET)
if(Python3_Interpreter_FOUND)
  add_test(NAME check_floors COMMAND ${Python3_EXECUTABLE} ${PROJECT_SOURCE_DIR}/scripts/check_floors.py ${PROJECT_SOURCE_DIR})
endif()

function(ert_floor_probe name target src header)
  add_test(NAME ${name}
    COMMAND ${CMAKE_C_COMPILER} -std=c11 -fsyntax-only
            "-I$<JOIN:$<TARGET_PROPERTY:${target},INCLUDE_DIRECTORIES>,;-I>"
            ${CMAKE_CURRENT_SOURCE_DIR}/floors/${src}
    COMMAND_EXPAND_LISTS)
  if(header)
    set_tests_properties(${name} PROPERTIES PASS_REGULAR_EXPRESSION "${header}.*([Nn]o such file|not found)")
  endif()
endfunction()
ert_floor_probe(floors_core_no_runtime ert_core up_core_runtime.c "runtime_internal.h")
ert_floor_probe(floors_kernels_no_loaders ert_kernels_cpu side_kernels_loaders.c "loaders.h")
ert_floor_probe(floors_loaders_no_kernels ert_loaders side_loaders_kernels.c "cpu_backend.h")
foreach(_t ert_core ert_kernels_cpu ert_loaders ert_runtime)
  ert_floor_probe(floors_control_${_t} ${_t} down_ok.c "")
endforeach()
