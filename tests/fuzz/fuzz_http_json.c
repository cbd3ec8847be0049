/* fuzz_http_json.c - libFuzzer harness for the bytes a cloud API answers, as the shared HTTP
 * client reads them before any provider does (providers/common/http.c): sbx_http_parse_json
 * (bounded depth, jansson, duplicate keys refused), sbx_http_response_json (an object at the
 * top), sbx_http_body_message and sbx_http_check (the server's message in an error, cut,
 * printable and redacted). The first input byte picks the HTTP status, the rest is the body.
 *
 * Properties: no crash or leak; a refusal is PROVISION with a text naming the call; an
 * accepted document re-serialises and parses back to an equal document; the error messages
 * are printable, bounded, and never contain a registered secret. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <jansson.h>

#include "fuzz/fuzz_oracle.h"
#include "providers/common/http.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* A secret registered with the client: it must never appear in a message. */
#define FUZZ_SECRET "sk-fuzz-SECRET-4242"

static const long STATUSES[] = {200, 201, 204, 400, 401, 403, 404, 408,
                                409, 410, 422, 429, 500, 502, 503, 507};

static void check_text(const char *text, size_t cap)
{
    FUZZ_REQUIRE(strlen(text) < cap, "a message overran its buffer");
    FUZZ_REQUIRE(strstr(text, FUZZ_SECRET) == NULL, "a message shows the secret: %s", text);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static sbx_http_client *client;
    if (!client) {
        sbx_http_client_config cfg = {.provider = "fuzz", .auth_hint = "check FUZZ_KEY"};
        sbx_error err = {0};
        if (sbx_http_client_new(&cfg, &client, &err) != SBX_OK)
            abort();
        sbx_http_client_add_secret(client, FUZZ_SECRET);
    }
    if (size == 0)
        return 0;
    long status = STATUSES[data[0] % (sizeof STATUSES / sizeof STATUSES[0])];
    /* The client always hands on a NUL-terminated copy of the body (body[body_len] == 0). */
    size_t len = size - 1;
    uint8_t *body = malloc(len + 1);
    if (!body)
        abort();
    memcpy(body, data + 1, len);
    body[len] = 0;

    sbx_error err = {0};
    json_t *j = NULL;
    sbx_status st = sbx_http_parse_json(client, "GET https://api.example/x", body, len, &j, &err);
    if (st == SBX_OK) {
        FUZZ_REQUIRE(j != NULL, "accepted without a document");
        char *dump = json_dumps(j, JSON_ENCODE_ANY | JSON_COMPACT);
        FUZZ_REQUIRE(dump != NULL, "an accepted document does not serialise");
        json_error_t jerr;
        json_t *again = json_loads(dump, JSON_DECODE_ANY | JSON_REJECT_DUPLICATES, &jerr);
        FUZZ_REQUIRE(again != NULL && json_equal(j, again),
                     "a document does not survive serialising (%s)", jerr.text);
        json_decref(again);
        free(dump);
        json_decref(j);
    } else {
        FUZZ_REQUIRE(j == NULL, "a refused body left a document");
        FUZZ_REQUIRE(st == SBX_E_PROVISION && err.code == st, "refused with %d", (int)st);
        FUZZ_REQUIRE(strstr(err.message, "GET https://api.example/x") != NULL,
                     "the refusal does not name the call: %s", err.message);
        check_text(err.message, sizeof err.message);
    }

    sbx_http_request req = {.method = "POST", .url = "https://api.example/sandboxes"};
    sbx_http_response resp = {.status = status, .body = body, .body_len = len};
    sbx_error e2 = {0};
    json_t *obj = NULL;
    st = sbx_http_response_json(client, &req, &resp, &obj, &e2);
    FUZZ_REQUIRE((st == SBX_OK) == (obj != NULL && json_is_object(obj)),
                 "response_json: status and document disagree");
    json_decref(obj);
    if (st != SBX_OK)
        check_text(e2.message, sizeof e2.message);

    char msg[SBX_HTTP_ERROR_BODY_MAX + 8];
    sbx_http_body_message(client, &resp, msg, sizeof msg);
    check_text(msg, sizeof msg);
    for (const char *p = msg; *p; p++)
        FUZZ_REQUIRE((unsigned char)*p >= 0x20 && *p != 0x7f, "unprintable byte in a message");

    sbx_error e3 = {0};
    st = sbx_http_check(client, &req, &resp, &e3);
    FUZZ_REQUIRE((st == SBX_OK) == (status >= 200 && status < 300), "check of %ld gave %d", status,
                 (int)st);
    if (st != SBX_OK) {
        FUZZ_REQUIRE(e3.message[0] != '\0', "an HTTP error without a text");
        check_text(e3.message, sizeof e3.message);
    }
    free(body);
    return 0;
}
