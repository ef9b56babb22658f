# cmake -DOUT=file.c -DDIR=http/console -DMAX_BYTES=N -P embed.cmake
#
# Writes the web console's assets (DIR's *.html, *.css, *.mjs, *.svg - the
# patterns http/CMakeLists.txt watches) into one C file as byte arrays, with a
# table of their names (the file name, served as /<name>) and sizes, which
# http/console.c serves.  Plain CMake (file(READ ... HEX)): no xxd needed.
# Fails when the assets together pass MAX_BYTES: the console stays small.
set(body "/* Generated from http/console/ by embed.cmake: do not edit. */\n#include <stddef.h>\n\n")
set(names "")
set(datas "")
set(sizes "")
set(total 0)
set(i 0)
file(GLOB FILES ${DIR}/*.html ${DIR}/*.css ${DIR}/*.mjs ${DIR}/*.svg)
list(SORT FILES)
foreach(f IN LISTS FILES)
  get_filename_component(name ${f} NAME)
  file(READ ${f} hex HEX)
  string(LENGTH "${hex}" n)
  math(EXPR n "${n} / 2")
  math(EXPR total "${total} + ${n}")
  string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," hex "${hex}")
  # 24 bytes a line keeps the file readable in a diff of the build tree
  string(REGEX REPLACE "((0x[0-9a-f][0-9a-f],){24})" "\\1\n    " hex "${hex}")
  string(APPEND body "static const unsigned char asset_${i}[] = {\n    ${hex}0x00};\n")
  string(APPEND names "    \"${name}\",\n")
  string(APPEND datas "    asset_${i},\n")
  string(APPEND sizes "    ${n},\n")
  math(EXPR i "${i} + 1")
endforeach()
if(total GREATER MAX_BYTES)
  message(FATAL_ERROR "the web console's assets are ${total} bytes, over the ${MAX_BYTES} allowed")
endif()
string(APPEND body "\nconst size_t http_console_count = ${i};\n")
string(APPEND body "const char *const http_console_names[] = {\n${names}    NULL};\n")
string(APPEND body "const unsigned char *const http_console_data[] = {\n${datas}    NULL};\n")
string(APPEND body "const size_t http_console_sizes[] = {\n${sizes}    0};\n")
string(APPEND body "const size_t http_console_total_bytes = ${total};\n")
file(WRITE ${OUT}.tmp "${body}")
# Touch the output only when it changed: no rebuild of the endpoint otherwise.
file(COPY_FILE ${OUT}.tmp ${OUT} ONLY_IF_DIFFERENT)
file(REMOVE ${OUT}.tmp)
