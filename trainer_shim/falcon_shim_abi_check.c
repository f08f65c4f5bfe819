/* Compiled as C: proves falcon_shim.h is a valid C header and the ABI is callable from C. */
#include "trainer_shim/falcon_shim.h"

static int32_t reject_all(void* user_data, const falcon_shim_directive* directive, char* reason,
                          uint32_t reason_capacity) {
  (void)user_data;
  (void)directive;
  if (reason_capacity > 3) {
    reason[0] = 'n';
    reason[1] = 'o';
    reason[2] = '\0';
  }
  return 1;
}

/* Returns the status of a poll made from C. */
int32_t falcon_shim_abi_check_poll_from_c(int64_t iteration) {
  return falcon_shim_poll_directives(iteration, reject_all, 0);
}

/* Records one op from C; returns the status. */
int32_t falcon_shim_abi_check_record_from_c(uint64_t comm_id) {
  falcon_shim_op op = {0};
  op.comm_id = comm_id;
  op.op_kind = FALCON_SHIM_OP_ALL_GATHER;
  op.bytes = 64;
  op.peer = -1;
  op.iteration = -1;
  op.host_start_ns = falcon_shim_now_ns();
  op.host_end_ns = falcon_shim_now_ns();
  return falcon_shim_record_op(&op);
}
