// The controller on a damaged store (real RocksDB in a temporary directory): a truncated or
// bit-flipped write-ahead log, or a truncated MANIFEST, makes ControllerServer::Start refuse with
// DATA_LOSS naming the file; with store_repair it starts after the repair and reports, in
// falcon_controller_store_repair_lost{kind}, exactly how many jobs, events, directives and
// acknowledged batches the damage cost.
#include <fcntl.h>
#include <prometheus/registry.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/clock.h"
#include "common/testing/file_damage.h"
#include "controller/controller.h"
#include "controller/metrics/metric_table.h"
#include "controller/service/controller_server.h"
#include "controller/store/rocksdb_kv_store.h"
#include "controller/testing/job_fixtures.h"
#include "controller/testing/sim_agent.h"
#include "gtest/gtest.h"

namespace falcon::controller::service {
namespace {

namespace fs = std::filesystem;

std::string Dir(const std::string& name) {
  std::string dir = absl::StrCat(std::getenv("TEST_TMPDIR"), "/", name);
  fs::remove_all(dir);
  return dir;
}

std::string OnlyFile(const std::string& dir, const std::string& prefix, const std::string& suffix) {
  std::vector<std::string> found;
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (name.rfind(prefix, 0) == 0 && name.size() >= suffix.size() &&
        name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0) {
      found.push_back(e.path());
    }
  }
  EXPECT_EQ(found.size(), 1u) << prefix << "*" << suffix << " in " << dir;
  return found.empty() ? "" : found[0];
}

int64_t Healthy(uint32_t rank, int64_t i) {
  return 100'000'000 + static_cast<int64_t>(((rank * 7919 + i * 104729) % 201) - 100) * 10'000;
}

// A controller on RocksDB in `dir` running a healthy job whose validation an operator forces at
// iteration 40 (an event with its pause directive, which the agents never answer). `at_30` gets
// the log's size after iteration 30, before the event.
class LiveController {
 public:
  explicit LiveController(const std::string& dir) : dir_(dir) {
    store::RocksDbOptions o;
    o.path = dir;
    kv_ = std::move(*store::RocksDbKvStore::Open(o, store::ControllerStore::TableNames()));
    c_ = std::move(*Controller::Create(ControllerOptions(), kv_.get(), &clock_, nullptr));
    spec_.dp = 4;
    spec_.pp = 2;
    spec_.ranks_per_node = 2;
    for (uint32_t n = 0; n < testing::NodeCount(spec_); ++n) {
      agents_.push_back(std::make_unique<testing::SimAgent>(
          testing::NodeName(n), testing::NodeName(n), testing::RanksOfNode(spec_, n)));
      EXPECT_TRUE(agents_.back()->Connect(*c_, {testing::NodeRegistration(spec_, n)}).ok());
    }
  }

  void Run(int64_t from, int64_t to) {
    for (int64_t i = from; i < to; ++i) {
      if (i == 40) {
        absl::StatusOr<uint64_t> forced = c_->ForceValidation(spec_.job);
        ASSERT_TRUE(forced.ok()) << forced.status();
      }
      for (auto& a : agents_) {
        falcon::v1::TelemetryBatch b;
        b.set_job(spec_.job);
        for (uint32_t r : a->ranks()) {
          *b.add_iterations() = testing::MakeSummary(spec_, r, i, Healthy(r, i));
        }
        auto ack = a->Send(*c_, b);
        ASSERT_TRUE(ack.ok()) << ack.status();
      }
      testing::Responder silent;
      silent.answer_tasks = false;
      for (int answered = 1; answered > 0;) {
        answered = 0;
        for (auto& a : agents_) answered += a->Respond(*c_, silent);
      }
      clock_.Advance(absl::Milliseconds(100));
    }
  }

  // What the controller holds, as recorded with its last sync.
  std::map<std::string, int64_t> Figures() const {
    std::map<std::string, int64_t> out;
    for (const auto& [k, v] : c_->Figures()) out[k] = static_cast<int64_t>(v);
    return out;
  }
  uint64_t WalBytes() const { return fs::file_size(OnlyFile(dir_, "", ".log")); }
  // A copy of the data directory as a kill -9 now would leave it.
  void CrashImage(const std::string& image) const {
    fs::copy(dir_, image, fs::copy_options::recursive);
  }
  // Stops cleanly.
  void Close() {
    c_.reset();
    kv_.reset();
  }

 private:
  std::string dir_;
  common::FakeClock clock_;
  testing::LayoutSpec spec_;
  std::unique_ptr<store::RocksDbKvStore> kv_;
  std::unique_ptr<Controller> c_;
  std::vector<std::unique_ptr<testing::SimAgent>> agents_;
};

absl::StatusOr<std::unique_ptr<ControllerServer>> StartOn(const std::string& dir, bool repair,
                                                          common::Clock* clock) {
  ServerOptions o;
  o.listen = "127.0.0.1:0";
  o.data_dir = dir;
  o.store_repair = repair;
  return ControllerServer::Start(o, clock);
}

std::map<std::string, int64_t> RepairLost(ControllerServer& server) {
  std::map<std::string, int64_t> out;
  for (const auto& family : server.registry().Collect()) {
    if (family.name != metrics::kStoreRepairLost.name) continue;
    for (const auto& m : family.metric) {
      for (const auto& l : m.label) {
        if (l.name == "kind") out[l.value] = static_cast<int64_t>(m.gauge.value);
      }
    }
  }
  return out;
}

enum class Damage { kTruncateWal, kFlipWalByte, kTruncateManifest };

class StoreDamageTest : public ::testing::TestWithParam<Damage> {};

TEST_P(StoreDamageTest, RefusedNamingTheFileThenRepairedWithTheLossCounted) {
  const std::string live = Dir("live");
  const std::string image = Dir("image");
  std::map<std::string, int64_t> before;
  {
    LiveController c(live);
    ASSERT_NO_FATAL_FAILURE(c.Run(0, 30));
    const uint64_t at_30 = c.WalBytes();
    ASSERT_NO_FATAL_FAILURE(c.Run(30, 70));
    before = c.Figures();
    ASSERT_EQ(before["events"], 1);
    ASSERT_GE(before["directives"], 1);
    if (GetParam() != Damage::kTruncateManifest) {
      c.CrashImage(image);
      const std::string wal = OnlyFile(image, "", ".log");
      if (GetParam() == Damage::kTruncateWal) {
        fs::resize_file(wal, at_30 + 7);  // Cut inside the first batch after iteration 30.
      } else {
        ASSERT_TRUE(common::testing::FlipByte(wal, at_30 + 100).ok());
      }
    } else {
      c.Close();
      c.CrashImage(image);
      const std::string manifest = OnlyFile(image, "MANIFEST-", "");
      fs::resize_file(manifest, fs::file_size(manifest) / 2);
    }
  }
  const std::string damaged = GetParam() == Damage::kTruncateManifest
                                  ? OnlyFile(image, "MANIFEST-", "")
                                  : OnlyFile(image, "", ".log");

  // The same damage twice: one copy for the controller, one to repair and count here.
  const std::string copy = Dir("image-copy");
  fs::copy(image, copy, fs::copy_options::recursive);

  common::FakeClock clock;
  auto refused = StartOn(image, /*repair=*/false, &clock);
  ASSERT_EQ(refused.status().code(), absl::StatusCode::kDataLoss) << refused.status();
  EXPECT_NE(refused.status().message().find(damaged), std::string::npos) << refused.status();
  EXPECT_NE(refused.status().message().find("--store_repair"), std::string::npos);

  auto repaired = StartOn(image, /*repair=*/true, &clock);
  ASSERT_TRUE(repaired.ok()) << repaired.status();
  const std::map<std::string, int64_t> lost = RepairLost(**repaired);
  std::map<std::string, int64_t> after;
  {
    store::RocksDbOptions o;
    o.path = copy;
    o.repair = true;
    auto kv = store::RocksDbKvStore::Open(o, store::ControllerStore::TableNames());
    ASSERT_TRUE(kv.ok()) << kv.status();
    auto figures = Controller::StoredFigures(store::ControllerStore(kv->get(), &clock));
    ASSERT_TRUE(figures.ok()) << figures.status();
    for (const auto& [k, v] : *figures) after[k] = static_cast<int64_t>(v);
  }
  ASSERT_EQ(lost.size(), 4u);
  for (const auto& [kind, n] : before) {
    EXPECT_EQ(lost.at(kind), n - after.at(kind)) << kind;
  }
  if (GetParam() == Damage::kTruncateManifest) {
    // A clean stop flushed everything into table files: RepairDB loses nothing.
    for (const auto& [kind, n] : lost) EXPECT_EQ(n, 0) << kind;
  } else {
    // The store as it was around iteration 30: the event, its directives and the batches of
    // 40 iterations of 4 agents are gone; the job is not.
    EXPECT_EQ(lost.at("jobs"), 0);
    EXPECT_EQ(lost.at("events"), 1);
    EXPECT_EQ(lost.at("directives"), before["directives"]);
    EXPECT_GE(lost.at("batches"), 4 * 39);
  }
  repaired->reset();
  // Repaired for good: the next start needs no flag.
  auto again = StartOn(image, /*repair=*/false, &clock);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_TRUE(RepairLost(**again).empty());
}

INSTANTIATE_TEST_SUITE_P(Damages, StoreDamageTest,
                         ::testing::Values(Damage::kTruncateWal, Damage::kFlipWalByte,
                                           Damage::kTruncateManifest));

}  // namespace
}  // namespace falcon::controller::service
