# Writes a header holding one template's text as a constexpr string, for the builtins table (a
# constexpr table cannot name the run-time strings of embed_templates.cmake).
# Invoked at build time: cmake -DOUTPUT=... -DINPUT=file -DNAME=identifier -P embed_constexpr.cmake
file(READ "${INPUT}" text)
string(FIND "${text}" ")lossjit_template\"" clash)
if(NOT clash EQUAL -1)
  message(FATAL_ERROR "${INPUT} contains the raw-string delimiter")
endif()
file(WRITE "${OUTPUT}.tmp" "// Generated from ${INPUT} by cmake/embed_constexpr.cmake. Do not edit.\n#pragma once\n#include <string_view>\n\nnamespace lossjit::templates {\ninline constexpr std::string_view ${NAME} = R\"lossjit_template(${text})lossjit_template\";\n}  // namespace lossjit::templates\n")
file(COPY_FILE "${OUTPUT}.tmp" "${OUTPUT}" ONLY_IF_DIFFERENT)
