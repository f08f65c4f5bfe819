#include "trainer_shim/op_record.h"

#include "gtest/gtest.h"

namespace falcon::trainer_shim {
namespace {

OpRecord Good() {
  OpRecord r;
  r.comm_id = 0xabcdef;
  r.op_kind = OpKind::OP_KIND_SEND;
  r.bytes = 4096;
  r.peer = 5;
  r.host_start_ns = 100;
  r.host_end_ns = 250;
  r.device_duration_ns = 120;
  r.seq = 7;
  r.iteration = 3;
  return r;
}

TEST(OpRecordTest, ValidateNamesTheField) {
  EXPECT_TRUE(ValidateOpRecord(Good()).ok());
  OpRecord r = Good();
  r.op_kind = OpKind::OP_KIND_UNSPECIFIED;
  EXPECT_NE(ValidateOpRecord(r).message().find("op_kind"), std::string::npos);
  r = Good();
  r.op_kind = static_cast<OpKind>(42);
  EXPECT_NE(ValidateOpRecord(r).message().find("op_kind"), std::string::npos);
  r = Good();
  r.comm_id = 0;
  EXPECT_NE(ValidateOpRecord(r).message().find("comm_id"), std::string::npos);
  r = Good();
  r.host_end_ns = 99;
  EXPECT_NE(ValidateOpRecord(r).message().find("host_end_ns"), std::string::npos);
  r = Good();
  r.bytes = kMaxOpBytes + 1;
  EXPECT_NE(ValidateOpRecord(r).message().find("bytes"), std::string::npos);
  r = Good();
  r.peer = -2;
  EXPECT_NE(ValidateOpRecord(r).message().find("peer"), std::string::npos);
}

TEST(OpRecordTest, ToProtoCopiesEveryField) {
  falcon::v1::OpRecord p;
  ToProto(Good(), &p);
  EXPECT_EQ(p.comm_id(), 0xabcdefu);
  EXPECT_EQ(p.op_kind(), falcon::v1::OP_KIND_SEND);
  EXPECT_EQ(p.bytes(), 4096u);
  EXPECT_EQ(p.peer(), 5);
  EXPECT_EQ(p.host_start_ns(), 100);
  EXPECT_EQ(p.host_end_ns(), 250);
  EXPECT_EQ(p.device_duration_ns(), 120);
  EXPECT_EQ(p.seq(), 7u);
  EXPECT_EQ(p.iteration(), 3);
}

TEST(OpRecordTest, OpKindValuesMatchTheProto) {
  EXPECT_EQ(static_cast<int>(OpKind::OP_KIND_ALL_REDUCE), falcon::v1::OP_KIND_ALL_REDUCE);
  EXPECT_EQ(static_cast<int>(OpKind::OP_KIND_RECV), falcon::v1::OP_KIND_RECV);
  EXPECT_EQ(static_cast<int>(OpKind::OP_KIND_ALL_TO_ALL), falcon::v1::OP_KIND_ALL_TO_ALL);
}

TEST(OpRecordTest, ValidateCommunicator) {
  CommunicatorInfo c;
  c.comm_id = 9;
  c.member_ranks = {0, 2, 4};
  EXPECT_TRUE(ValidateCommunicator(c, 8).ok());
  c.member_ranks = {0, 2, 2};
  EXPECT_NE(ValidateCommunicator(c, 8).message().find("member_ranks[2]"), std::string::npos);
  c.member_ranks = {0, 9};
  EXPECT_NE(ValidateCommunicator(c, 8).message().find("member_ranks[1]"), std::string::npos);
  c.member_ranks = {};
  EXPECT_FALSE(ValidateCommunicator(c, 8).ok());
  c.member_ranks = {1};
  c.comm_id = 0;
  EXPECT_NE(ValidateCommunicator(c, 8).message().find("comm_id"), std::string::npos);
  c.comm_id = 1;
  c.name = std::string(129, 'x');
  EXPECT_NE(ValidateCommunicator(c, 8).message().find("name"), std::string::npos);
}

TEST(OpRecordTest, ValidateIterationHint) {
  IterationHint h;
  h.iteration = 2;
  h.start_ns = 10;
  h.end_ns = 20;
  EXPECT_TRUE(ValidateIterationHint(h).ok());
  h.end_ns = 5;
  EXPECT_FALSE(ValidateIterationHint(h).ok());
  h.end_ns = 20;
  h.iteration = -1;
  EXPECT_FALSE(ValidateIterationHint(h).ok());
}

}  // namespace
}  // namespace falcon::trainer_shim
