# check_floors: no #include points up or sideways across the floors
# (scripts/check_floors.py; CMake's per-floor include directories catch the
# rest at compile time).
find_package(Python3 COMPONENTS Interpreter QUIET)
if(Python3_Interpreter_FOUND)
  add_test(NAME check_floors COMMAND ${Python3_EXECUTABLE} ${PROJECT_SOURCE_DIR}/scripts/check_floors.py ${PROJECT_SOURCE_DIR})
endif()
