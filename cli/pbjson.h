/* pbjson.h - any protobuf-c message as protobuf's canonical proto3 JSON mapping (the one every
 * protobuf JSON parser reads): lowerCamelCase field names, bytes as padded base64, enums as
 * their names, 64-bit integers as decimal strings, fields at their default value omitted
 * (members of a oneof are kept when set), maps as objects. The CLI prints completions with it;
 * it never decodes.
 */
#ifndef SBX_CLI_PBJSON_H
#define SBX_CLI_PBJSON_H

#include <jansson.h>
#include <protobuf-c/protobuf-c.h>

/* A new JSON object for m; NULL on ENOMEM. */
json_t *cli_pb_to_json(const ProtobufCMessage *m);

#endif
