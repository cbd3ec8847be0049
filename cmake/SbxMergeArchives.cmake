# SbxMergeArchives.cmake - `cmake -DAR=ar -DMRI=script -P` this file: runs ar's MRI script
# (create / addlib / save) that SbxInstall.cmake generates, with the script on ar's stdin and no
# shell in between.
execute_process(COMMAND ${AR} -M INPUT_FILE ${MRI} RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "ar -M < ${MRI} failed (${rc})")
endif()
