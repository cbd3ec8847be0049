/* nats.c - the `sbx` executable's stubs for libnats (see lazy.h), used by the queue broker. */
#include <nats/nats.h>

#include "cli/lazy/lazy.h"

static cli_lazy_lib nats = CLI_LAZY_LIB(SBX_LAZY_SONAME_NATS, "libnats3.4");

SBX_LAZY(nats, natsStatus, jsConsumerConfig_Init, (jsConsumerConfig * a0), (a0))
SBX_LAZY_VOID(nats, jsConsumerInfo_Destroy, (jsConsumerInfo * a0), (a0))
SBX_LAZY_VOID(nats, jsCtx_Destroy, (jsCtx * a0), (a0))
SBX_LAZY_VOID(nats, jsMsgMetaData_Destroy, (jsMsgMetaData * a0), (a0))
SBX_LAZY(nats, natsStatus, jsOptions_Init, (jsOptions * a0), (a0))
SBX_LAZY_VOID(nats, jsPubAck_Destroy, (jsPubAck * a0), (a0))
SBX_LAZY(nats, natsStatus, jsPubOptions_Init, (jsPubOptions * a0), (a0))
SBX_LAZY(nats, natsStatus, jsStreamConfig_Init, (jsStreamConfig * a0), (a0))
SBX_LAZY_VOID(nats, jsStreamInfo_Destroy, (jsStreamInfo * a0), (a0))
SBX_LAZY(nats, natsStatus, jsSubOptions_Init, (jsSubOptions * a0), (a0))
SBX_LAZY(nats, natsStatus, js_AddConsumer,
         (jsConsumerInfo * *a0, jsCtx *a1, const char *a2, jsConsumerConfig *a3, jsOptions *a4,
          jsErrCode *a5),
         (a0, a1, a2, a3, a4, a5))
SBX_LAZY(nats, natsStatus, js_AddStream,
         (jsStreamInfo * *a0, jsCtx *a1, jsStreamConfig *a2, jsOptions *a3, jsErrCode *a4),
         (a0, a1, a2, a3, a4))
SBX_LAZY(nats, natsStatus, js_CreateKeyValue, (kvStore * *a0, jsCtx *a1, kvConfig *a2),
         (a0, a1, a2))
SBX_LAZY(nats, natsStatus, js_GetConsumerInfo,
         (jsConsumerInfo * *a0, jsCtx *a1, const char *a2, const char *a3, jsOptions *a4,
          jsErrCode *a5),
         (a0, a1, a2, a3, a4, a5))
SBX_LAZY(nats, natsStatus, js_GetStreamInfo,
         (jsStreamInfo * *a0, jsCtx *a1, const char *a2, jsOptions *a3, jsErrCode *a4),
         (a0, a1, a2, a3, a4))
SBX_LAZY(nats, natsStatus, js_KeyValue, (kvStore * *a0, jsCtx *a1, const char *a2), (a0, a1, a2))
SBX_LAZY(nats, natsStatus, js_PublishMsg,
         (jsPubAck * *a0, jsCtx *a1, natsMsg *a2, jsPubOptions *a3, jsErrCode *a4),
         (a0, a1, a2, a3, a4))
SBX_LAZY(nats, natsStatus, js_PullSubscribe,
         (natsSubscription * *a0, jsCtx *a1, const char *a2, const char *a3, jsOptions *a4,
          jsSubOptions *a5, jsErrCode *a6),
         (a0, a1, a2, a3, a4, a5, a6))
SBX_LAZY(nats, natsStatus, kvConfig_Init, (kvConfig * a0), (a0))
SBX_LAZY_VOID(nats, kvEntry_Destroy, (kvEntry * a0), (a0))
SBX_LAZY(nats, uint64_t, kvEntry_Revision, (kvEntry * a0), (a0))
SBX_LAZY(nats, const void *, kvEntry_Value, (kvEntry * a0), (a0))
SBX_LAZY(nats, int, kvEntry_ValueLen, (kvEntry * a0), (a0))
SBX_LAZY(nats, natsStatus, kvStore_Create,
         (uint64_t * a0, kvStore *a1, const char *a2, const void *a3, int a4), (a0, a1, a2, a3, a4))
SBX_LAZY_VOID(nats, kvStore_Destroy, (kvStore * a0), (a0))
SBX_LAZY(nats, natsStatus, kvStore_Get, (kvEntry * *a0, kvStore *a1, const char *a2), (a0, a1, a2))
SBX_LAZY(nats, natsStatus, kvStore_Update,
         (uint64_t * a0, kvStore *a1, const char *a2, const void *a3, int a4, uint64_t a5),
         (a0, a1, a2, a3, a4, a5))
SBX_LAZY_VOID(nats, natsConnection_Close, (natsConnection * a0), (a0))
SBX_LAZY(nats, natsStatus, natsConnection_Connect, (natsConnection * *a0, natsOptions *a1),
         (a0, a1))
SBX_LAZY_VOID(nats, natsConnection_Destroy, (natsConnection * a0), (a0))
SBX_LAZY(nats, natsStatus, natsConnection_FlushTimeout, (natsConnection * a0, int64_t a1), (a0, a1))
SBX_LAZY(nats, natsStatus, natsConnection_GetConnectedUrl,
         (natsConnection * a0, char *a1, size_t a2), (a0, a1, a2))
SBX_LAZY(nats, int64_t, natsConnection_GetMaxPayload, (natsConnection * a0), (a0))
SBX_LAZY(nats, natsStatus, natsConnection_JetStream,
         (jsCtx * *a0, natsConnection *a1, jsOptions *a2), (a0, a1, a2))
SBX_LAZY(nats, natsConnStatus, natsConnection_Status, (natsConnection * a0), (a0))
SBX_LAZY(nats, natsStatus, natsConnection_Publish,
         (natsConnection * a0, const char *a1, const void *a2, int a3), (a0, a1, a2, a3))
SBX_LAZY(nats, natsStatus, natsConnection_Subscribe,
         (natsSubscription * *a0, natsConnection *a1, const char *a2, natsMsgHandler a3, void *a4),
         (a0, a1, a2, a3, a4))
SBX_LAZY(nats, natsStatus, natsMsgHeader_Get, (natsMsg * a0, const char *a1, const char **a2),
         (a0, a1, a2))
SBX_LAZY(nats, natsStatus, natsMsgHeader_Set, (natsMsg * a0, const char *a1, const char *a2),
         (a0, a1, a2))
SBX_LAZY_VOID(nats, natsMsgList_Destroy, (natsMsgList * a0), (a0))
SBX_LAZY(nats, natsStatus, natsMsg_Ack, (natsMsg * a0, jsOptions *a1), (a0, a1))
SBX_LAZY(nats, natsStatus, natsMsg_Create,
         (natsMsg * *a0, const char *a1, const char *a2, const char *a3, int a4),
         (a0, a1, a2, a3, a4))
SBX_LAZY_VOID(nats, natsMsg_Destroy, (natsMsg * a0), (a0))
SBX_LAZY(nats, const char *, natsMsg_GetData, (const natsMsg *a0), (a0))
SBX_LAZY(nats, int, natsMsg_GetDataLength, (const natsMsg *a0), (a0))
SBX_LAZY(nats, natsStatus, natsMsg_GetMetaData, (jsMsgMetaData * *a0, natsMsg *a1), (a0, a1))
SBX_LAZY(nats, const char *, natsMsg_GetSubject, (const natsMsg *a0), (a0))
SBX_LAZY(nats, natsStatus, natsMsg_InProgress, (natsMsg * a0, jsOptions *a1), (a0, a1))
SBX_LAZY(nats, natsStatus, natsMsg_Term, (natsMsg * a0, jsOptions *a1), (a0, a1))
SBX_LAZY(nats, natsStatus, natsOptions_Create, (natsOptions * *a0), (a0))
SBX_LAZY_VOID(nats, natsOptions_Destroy, (natsOptions * a0), (a0))
SBX_LAZY(nats, natsStatus, natsOptions_LoadCATrustedCertificates,
         (natsOptions * a0, const char *a1), (a0, a1))
SBX_LAZY(nats, natsStatus, natsOptions_LoadCertificatesChain,
         (natsOptions * a0, const char *a1, const char *a2), (a0, a1, a2))
SBX_LAZY(nats, natsStatus, natsOptions_SetCustomInboxPrefix, (natsOptions * a0, const char *a1),
         (a0, a1))
SBX_LAZY(nats, natsStatus, natsOptions_SetMaxReconnect, (natsOptions * a0, int a1), (a0, a1))
SBX_LAZY(nats, natsStatus, natsOptions_SetNKey,
         (natsOptions * a0, const char *a1, natsSignatureHandler a2, void *a3), (a0, a1, a2, a3))
SBX_LAZY(nats, natsStatus, natsOptions_SetName, (natsOptions * a0, const char *a1), (a0, a1))
SBX_LAZY(nats, natsStatus, natsOptions_SetReconnectWait, (natsOptions * a0, int64_t a1), (a0, a1))
SBX_LAZY(nats, natsStatus, natsOptions_SetSecure, (natsOptions * a0, _Bool a1), (a0, a1))
SBX_LAZY(nats, natsStatus, natsOptions_SetSendAsap, (natsOptions * a0, _Bool a1), (a0, a1))
SBX_LAZY(nats, natsStatus, natsOptions_SetServers, (natsOptions * a0, const char **a1, int a2),
         (a0, a1, a2))
SBX_LAZY(nats, natsStatus, natsOptions_SetTimeout, (natsOptions * a0, int64_t a1), (a0, a1))
SBX_LAZY(nats, natsStatus, natsOptions_SetUserInfo,
         (natsOptions * a0, const char *a1, const char *a2), (a0, a1, a2))
SBX_LAZY(nats, natsStatus, natsOptions_UseGlobalMessageDelivery, (natsOptions * a0, _Bool a1),
         (a0, a1))
SBX_LAZY(nats, const char *, natsStatus_GetText, (natsStatus a0), (a0))
SBX_LAZY_VOID(nats, natsSubscription_Destroy, (natsSubscription * a0), (a0))
SBX_LAZY(nats, natsStatus, natsSubscription_Drain, (natsSubscription * a0), (a0))
SBX_LAZY(nats, natsStatus, natsSubscription_Fetch,
         (natsMsgList * a0, natsSubscription *a1, int a2, int64_t a3, jsErrCode *a4),
         (a0, a1, a2, a3, a4))
SBX_LAZY(nats, natsStatus, natsSubscription_SetOnCompleteCB,
         (natsSubscription * a0, natsOnCompleteCB a1, void *a2), (a0, a1, a2))
SBX_LAZY(nats, natsStatus, natsSubscription_Unsubscribe, (natsSubscription * a0), (a0))
SBX_LAZY(nats, natsStatus, natsSubscription_WaitForDrainCompletion,
         (natsSubscription * a0, int64_t a1), (a0, a1))
SBX_LAZY(nats, const char *, nats_GetLastError, (natsStatus * a0), (a0))
SBX_LAZY(nats, natsStatus, nats_Sign, (const char *a0, const char *a1, unsigned char **a2, int *a3),
         (a0, a1, a2, a3))
