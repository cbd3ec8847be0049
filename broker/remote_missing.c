/* remote_missing.c - TEMPORARY stand-in for broker/remote.c (helper "worker" owns it), so that
 * sbx_broker_open links before the remote broker lands. The worker helper deletes this file
 * when it adds broker/remote.c.
 */
#include "sbx/broker.h"

sbx_status sbx_broker_open_remote(const sbx_remote_config *remote, sbx_broker **out,
                                  sbx_error *err)
{
    (void)remote;
    *out = NULL;
    return sbx_error_set(err, SBX_E_BROKER,
                         "remote broker not built (broker/remote.c is missing from this build)");
}
