/* fuzz_ssm_sts_xml.c - libFuzzer harness for the ec2_ssm provider's STS AssumeRole answer
 * parser (aws_sts_parse), which reads bytes from the network (an STS endpoint, or anything that
 * answers in its place). Properties: no crash or leak; on success every credential field is
 * non-empty and no longer than the input; on failure nothing is left allocated. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "providers/ec2_ssm/aws.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1);
    if (text == NULL)
        return 0;
    if (size > 0)
        memcpy(text, data, size);
    text[size] = '\0';
    aws_creds c = {0};
    char code[AWS_CODE_MAX], msg[256];
    sbx_status st = aws_sts_parse(text, size, &c, code, msg, sizeof(msg));
    if (st == SBX_OK) {
        if (c.access_key_id == NULL || !c.access_key_id[0] || c.secret_access_key == NULL ||
            !c.secret_access_key[0] || c.session_token == NULL || !c.session_token[0] ||
            strlen(c.session_token) > size) {
            fprintf(stderr, "fuzz finding: aws_sts_parse accepted incomplete credentials\n");
            abort();
        }
    } else if (c.access_key_id != NULL || c.secret_access_key != NULL || c.session_token) {
        fprintf(stderr, "fuzz finding: aws_sts_parse failed but left credentials behind\n");
        abort();
    }
    if (strlen(code) >= AWS_CODE_MAX) {
        fprintf(stderr, "fuzz finding: error code overflow\n");
        abort();
    }
    aws_creds_clear(&c);
    free(text);
    return 0;
}
