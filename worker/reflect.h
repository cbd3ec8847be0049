/* reflect.h - gRPC server reflection for the worker (reflect.c), private to worker/. */
#ifndef SBX_WORKER_REFLECT_H
#define SBX_WORKER_REFLECT_H

#include <stddef.h>
#include <stdint.h>

/* Answers one ServerReflectionRequest (msg, len: the message without its 5-byte prefix) of
 * grpc.reflection.v1 or v1alpha (one wire format) with a framed ServerReflectionResponse in a
 * new malloc'd buffer (*out_len set). Requests it cannot answer get an error_response, as the
 * protocol says; NULL only when out of memory. Thread-safe. */
uint8_t *worker_reflection_answer(const uint8_t *msg, size_t len, size_t *out_len);

#endif
