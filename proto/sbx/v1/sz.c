#include <stdio.h>
#include "sbx/v1/agent.pb.h"
#include "sbx/v1/execution.pb.h"
int main(void){
printf("%7zu sbx_v1_AgentEnv\n", sizeof(sbx_v1_AgentEnv));
printf("%7zu sbx_v1_AgentExec\n", sizeof(sbx_v1_AgentExec));
printf("%7zu sbx_v1_AgentCode\n", sizeof(sbx_v1_AgentCode));
printf("%7zu sbx_v1_AgentStdin\n", sizeof(sbx_v1_AgentStdin));
printf("%7zu sbx_v1_AgentFileWrite\n", sizeof(sbx_v1_AgentFileWrite));
printf("%7zu sbx_v1_AgentFileRead\n", sizeof(sbx_v1_AgentFileRead));
printf("%7zu sbx_v1_AgentFileList\n", sizeof(sbx_v1_AgentFileList));
printf("%7zu sbx_v1_AgentSignal\n", sizeof(sbx_v1_AgentSignal));
printf("%7zu sbx_v1_AgentPing\n", sizeof(sbx_v1_AgentPing));
printf("%7zu sbx_v1_AgentAttach\n", sizeof(sbx_v1_AgentAttach));
printf("%7zu sbx_v1_AgentRequest\n", sizeof(sbx_v1_AgentRequest));
printf("%7zu sbx_v1_AgentStarted\n", sizeof(sbx_v1_AgentStarted));
printf("%7zu sbx_v1_AgentOutput\n", sizeof(sbx_v1_AgentOutput));
printf("%7zu sbx_v1_AgentExit\n", sizeof(sbx_v1_AgentExit));
printf("%7zu sbx_v1_AgentFileData\n", sizeof(sbx_v1_AgentFileData));
printf("%7zu sbx_v1_AgentFileEntry\n", sizeof(sbx_v1_AgentFileEntry));
printf("%7zu sbx_v1_AgentError\n", sizeof(sbx_v1_AgentError));
printf("%7zu sbx_v1_AgentPong\n", sizeof(sbx_v1_AgentPong));
printf("%7zu sbx_v1_AgentWritten\n", sizeof(sbx_v1_AgentWritten));
printf("%7zu sbx_v1_AgentEvent\n", sizeof(sbx_v1_AgentEvent));
printf("%7zu sbx_v1_Principal_CredentialsEntry\n", sizeof(sbx_v1_Principal_CredentialsEntry));
printf("%7zu sbx_v1_Principal\n", sizeof(sbx_v1_Principal));
printf("%7zu sbx_v1_Policy\n", sizeof(sbx_v1_Policy));
printf("%7zu sbx_v1_SessionHandle\n", sizeof(sbx_v1_SessionHandle));
printf("%7zu sbx_v1_RunCode_EnvEntry\n", sizeof(sbx_v1_RunCode_EnvEntry));
printf("%7zu sbx_v1_RunCode\n", sizeof(sbx_v1_RunCode));
printf("%7zu sbx_v1_RunCommand_EnvEntry\n", sizeof(sbx_v1_RunCommand_EnvEntry));
printf("%7zu sbx_v1_RunCommand\n", sizeof(sbx_v1_RunCommand));
printf("%7zu sbx_v1_InstallPackages\n", sizeof(sbx_v1_InstallPackages));
printf("%7zu sbx_v1_WriteFile\n", sizeof(sbx_v1_WriteFile));
printf("%7zu sbx_v1_ReadFile\n", sizeof(sbx_v1_ReadFile));
printf("%7zu sbx_v1_ListFiles\n", sizeof(sbx_v1_ListFiles));
printf("%7zu sbx_v1_Destroy\n", sizeof(sbx_v1_Destroy));
printf("%7zu sbx_v1_ExecutionRequest\n", sizeof(sbx_v1_ExecutionRequest));
printf("%7zu sbx_v1_File\n", sizeof(sbx_v1_File));
printf("%7zu sbx_v1_Result_ProviderDataEntry\n", sizeof(sbx_v1_Result_ProviderDataEntry));
printf("%7zu sbx_v1_Result\n", sizeof(sbx_v1_Result));
printf("%7zu sbx_v1_ExecutionCompletion\n", sizeof(sbx_v1_ExecutionCompletion));
printf("%7zu sbx_v1_Capabilities\n", sizeof(sbx_v1_Capabilities));
printf("%7zu sbx_v1_OutputChunk\n", sizeof(sbx_v1_OutputChunk));
printf("%7zu sbx_v1_ExecuteEvent\n", sizeof(sbx_v1_ExecuteEvent));
printf("%7zu sbx_v1_DescribeRequest\n", sizeof(sbx_v1_DescribeRequest));
printf("%7zu sbx_v1_ProfileDescription\n", sizeof(sbx_v1_ProfileDescription));
printf("%7zu sbx_v1_DescribeResponse\n", sizeof(sbx_v1_DescribeResponse));
return 0;}
