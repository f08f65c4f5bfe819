#include "chaos/record.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace falcon::chaos {
namespace {

using ::testing::HasSubstr;

Record Sample() {
  Record r;
  r.driver_pid = 4242;
  r.cluster_kind = "netns";
  r.cluster_prefix = "fn3a7f";
  r.started_unix_ms = 1'700'000'000'000;
  FaultRecord link;
  link.id = 1;
  link.spec = "link:src_rank=3,dst=node1,rate=8mbit,both,until=30";
  link.kind = FaultKind::kLink;
  link.until_s = 30;
  link.target.src_node = "node0";
  link.target.dst_node = "node1";
  link.target.src_rank = 3;
  link.target.both = true;
  link.target.rate_bit_per_second = 8'000'000;
  link.target.burst_bytes = 32768;
  link.target.shaped = {{"node0", "fn3a7f-node0", "eth0", "node1", "10.77.3.2", "fa1c:1"},
                        {"node1", "fn3a7f-node1", "eth0", "node0", "10.77.3.1", "fa1c:1"}};
  link.applied_unix_ms = 1'700'000'000'010;
  link.applied_iteration = 120;
  link.removed_unix_ms = 1'700'000'030'010;
  r.faults.push_back(link);
  FaultRecord nic;
  nic.id = 2;
  nic.spec = "nic:node=node2,rate=5mbit";
  nic.kind = FaultKind::kNic;
  nic.from_s = 5;
  nic.target.node = "node2";
  nic.target.address = "10.77.3.3";
  nic.target.rate_bit_per_second = 5'000'000;
  nic.target.burst_bytes = 32768;
  nic.target.shaped = {{"node2", "fn3a7f-node2", "eth0", "", "", "fa1c:"},
                       {"node2", "", "fn3a7fh2", "", "", "fa1c:"}};
  nic.error = "fault 2 (nic:node=node2,rate=5mbit): tc ...: exit 2: Error";
  r.faults.push_back(nic);
  FaultRecord compute;
  compute.id = 3;
  compute.spec = "compute:rank=5,quota=0.3";
  compute.kind = FaultKind::kCompute;
  compute.target.rank = 5;
  compute.target.node = "node2";
  compute.target.pid = 999;
  compute.target.rank_generation = 1;
  compute.target.cgroup_version = 1;
  compute.target.cgroup = "/sys/fs/cgroup/cpu/falcon-chaos.fn3a7f.4242.3";
  compute.target.origin_cgroup = "/";
  compute.target.thread = "falcon-device";
  compute.target.tids = {1001, 1004};
  compute.target.slowdown = 1.5;
  compute.target.measured_cores = 0.45;
  compute.target.quota_cores = 0.3;
  compute.target.period_us = 100000;
  compute.target.quota_us = 30000;
  compute.applied_unix_ms = 1;
  compute.removed_unix_ms = 2;
  compute.note = "process 999 had exited";
  r.faults.push_back(compute);
  FaultRecord contention;
  contention.id = 4;
  contention.spec = "contention:pid=77,workers=2";
  contention.kind = FaultKind::kContention;
  contention.target.pid = 77;
  contention.target.cpus = "0-1";
  contention.target.workers = 2;
  contention.target.nice = 5;
  contention.target.stress_pid = 78;
  r.faults.push_back(contention);
  return r;
}

TEST(RecordTest, RoundTrip) {
  const Record r = Sample();
  const std::string json = RecordToJson(r);
  absl::StatusOr<Record> back = ParseRecord(json, "truth.json");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(RecordToJson(*back), json);
  ASSERT_EQ(back->faults.size(), 4u);
  EXPECT_EQ(back->faults[0].target.src_rank, 3);
  EXPECT_FALSE(back->faults[0].target.dst_rank.has_value());
  EXPECT_EQ(back->faults[0].until_s, 30);
  EXPECT_FALSE(back->faults[0].removed_iteration.has_value());
  EXPECT_EQ(back->faults[1].target.shaped[1].iface, "fn3a7fh2");
  EXPECT_EQ(back->faults[2].target.rank_generation, 1);
  EXPECT_DOUBLE_EQ(back->faults[2].target.quota_cores, 0.3);
  EXPECT_EQ(back->faults[2].target.thread, "falcon-device");
  EXPECT_EQ(back->faults[2].target.tids, (std::vector<int>{1001, 1004}));
  EXPECT_FALSE(back->faults[3].target.rank.has_value());
  EXPECT_EQ(back->Fault(4)->target.stress_pid, 78);
  EXPECT_EQ(back->Fault(5), nullptr);
}

TEST(RecordTest, FieldsAsDocumented) {
  const std::string json = RecordToJson(Sample());
  for (const char* field : {"\"driver_pid\": 4242",
                            "\"cluster_kind\": \"netns\"",
                            "\"started_unix_ms\": 1700000000000",
                            "\"until_s\": null",
                            "\"applied_iteration\": 120",
                            "\"removed_iteration\": null",
                            "\"class\": \"fa1c:1\"",
                            "\"qdisc\": \"fa1c:\"",
                            "\"dst_address\": \"10.77.3.2\"",
                            "\"rate_bit_per_second\": 8000000",
                            "\"origin_cgroup\": \"/\"",
                            "\"quota_us\": 30000",
                            "\"slowdown\": 1.5",
                            "\"measured_cores\": 0.45",
                            "\"cpus\": \"0-1\"",
                            "\"nice\": 5",
                            "\"stress_pid\": 78",
                            "\"thread\": \"falcon-device\"",
                            "\"note\": \"process 999 had exited\"",
                            "\"kind\": \"contention\""}) {
    EXPECT_THAT(json, HasSubstr(field));
  }
  EXPECT_EQ(json.back(), '\n');
}

TEST(RecordTest, ParseErrorsNameTheField) {
  EXPECT_THAT(ParseRecord("[]", "t.json").status().message(),
              HasSubstr("t.json: not a JSON object"));
  EXPECT_THAT(ParseRecord("{", "t.json").status().message(), HasSubstr("t.json: not valid JSON"));
  std::string json = RecordToJson(Sample());
  std::string bad = json;
  bad.replace(bad.find("\"kind\": \"nic\""), 13, "\"kind\": \"net\"");
  EXPECT_THAT(ParseRecord(bad, "t.json").status().message(),
              HasSubstr("t.json: faults[1].kind: unknown kind 'net'"));
  bad = json;
  bad.replace(bad.find("\"stress_pid\": 78"), 16, "\"stress_pid\": \"x\"");
  EXPECT_THAT(ParseRecord(bad, "t.json").status().message(),
              HasSubstr("faults[3].target.stress_pid: must be an integer"));
  bad = json;
  bad.replace(bad.find("\"thread\": \"falcon-device\""), 25, "\"thread\": 7");
  EXPECT_THAT(ParseRecord(bad, "t.json").status().message(),
              HasSubstr("faults[2].target.thread: must be a string or null"));
  bad = json;
  bad.replace(bad.find("\"driver_pid\""), 12, "\"driver_pod\"");
  EXPECT_THAT(ParseRecord(bad, "t.json").status().message(), HasSubstr("driver_pid: missing"));
}

}  // namespace
}  // namespace falcon::chaos
