# SbxEmbedBytes.cmake - `cmake -DIN=file -DOUT=file.c -DNAME=symbol -P` this file: writes a C
# source defining `const unsigned char NAME[]` with IN's bytes and `const size_t NAME_len`, so
# build outputs (the contract's FileDescriptorSet for server reflection) are compiled in rather
# than read from disk at run time.
file(READ ${IN} hex HEX)
string(LENGTH "${hex}" n)
math(EXPR len "${n} / 2")
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," body "${hex}")
string(REGEX REPLACE "((0x..,){16})" "\\1\n    " body "${body}")
file(WRITE ${OUT}.tmp
     "/* generated from ${IN} by cmake/SbxEmbedBytes.cmake; do not edit */\n"
     "#include <stddef.h>\n"
     "extern const unsigned char ${NAME}[];\nextern const size_t ${NAME}_len;\n"
     "const unsigned char ${NAME}[] = {\n    ${body}\n};\n"
     "const size_t ${NAME}_len = ${len};\n")
file(RENAME ${OUT}.tmp ${OUT})
