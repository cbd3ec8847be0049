/* fuzz_ssm_creds_file.c - libFuzzer harness for the shared credentials file parser
 * (aws_creds_parse_file): the file is written by other tools and users, so it is untrusted
 * input. Properties: no crash or leak; success means a non-empty key id and secret; failure
 * leaves nothing allocated and never quotes a value (checked: the error never contains the
 * secret marker planted by the seeds). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "providers/ec2_ssm/creds.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    aws_creds c = {0};
    sbx_error err = {0};
    sbx_status st = aws_creds_parse_file((const char *)data, size, "default", "fuzz", &c, &err);
    if (st == SBX_OK) {
        if (c.access_key_id == NULL || !c.access_key_id[0] || c.secret_access_key == NULL ||
            !c.secret_access_key[0]) {
            fprintf(stderr, "fuzz finding: accepted a profile without key id or secret\n");
            abort();
        }
    } else {
        if (c.access_key_id != NULL || c.secret_access_key != NULL || c.session_token) {
            fprintf(stderr, "fuzz finding: failure left credentials behind\n");
            abort();
        }
        if (strstr(err.message, "SECRETMARKER") != NULL) {
            fprintf(stderr, "fuzz finding: an error quoted a value: %s\n", err.message);
            abort();
        }
    }
    aws_creds_clear(&c);
    return 0;
}
