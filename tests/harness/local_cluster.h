// falcon::tests::harness::LocalCluster: a whole Falcon deployment on loopback, for the end-to-end
// tests and the demo. Start() runs, as child processes:
//   1. falcon_controller --listen 127.0.0.1:0 --metrics_listen 127.0.0.1:0 --data_dir DIR
//      (a fresh RocksDB directory unless one is given) and waits for `listening on` and
//      `metrics on`;
//   2. one falcon_agent per emulated node (node0 .. node{K-1}), each on its own unix socket under
//      the work directory, metrics on port 0, and waits for `metrics on`;
//   3. the falcon_train launcher (DP x PP ranks on K emulated nodes) with
//      --agent_socket WORK/agent-{node}.sock, --job, --json_log WORK/train.jsonl and the given
//      trainer arguments (unless start_trainer is false; then StartTrainer()).
// With options.tls, Start() first makes a cluster PKI under WORK/pki with deploy/pki/falcon-pki.sh
// (openssl; docs/operations.md#tls): the CA (ca.pem), the controller's certificate
// (controller.pem/.key, SAN IP:127.0.0.1), one node certificate per agent named as its --node
// (node0.pem/.key, ...) and an operator client certificate (kTlsOperator: harness.pem/.key) for
// the cluster's own Control stub. The controller then serves mutual TLS (--tls_cert, --tls_key,
// --tls_ca instead of --plaintext), each agent presents its node's certificate (instead of
// --plaintext=true), and NewControlStub() / SetSettings() present the operator's; the script's
// output goes to WORK/pki.log. Files already in WORK/pki (a work_dir kept from an earlier run) are
// reused. Without tls everything speaks plaintext, and the controller and agents log their
// plaintext WARNING.
// Every child's stdout and stderr go to WORK/<name>.log. Children die with the process that
// started them (PR_SET_PDEATHSIG; the trainer's ranks die with the launcher), and Stop() (also
// run by the destructor) sends SIGTERM, then SIGKILL after a grace period, so nothing leaks even
// when a test fails. Binaries are found in the runfiles of the running test or binary (data deps
// //controller:falcon_controller, //agent:falcon_agent, //trainer:falcon_train, and
// //deploy/pki:falcon-pki.sh with tls) or given explicitly.
//
// Not thread-safe: one thread drives a cluster. PR_SET_PDEATHSIG fires when the thread that
// started a child exits, so start (and restart) from a thread that lives as long as the cluster.
#ifndef FALCON_TESTS_HARNESS_LOCAL_CLUSTER_H_
#define FALCON_TESTS_HARNESS_LOCAL_CLUSTER_H_

#include <sys/types.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "cluster/cluster_spec.h"
#include "cluster/netns.h"
#include "common/subprocess.h"
#include "grpcpp/security/credentials.h"
#include "proto/falcon/v1/control.grpc.pb.h"
#include "proto/grpc_tls.h"

namespace falcon::tests::harness {

// The CN of the operator client certificate the cluster's own Control stub presents with tls (the
// identity the controller's audit trail records for SetSettings()).
inline constexpr char kTlsOperator[] = "harness";

struct LocalClusterOptions {
  // Layout of the reference trainer: DP x PP ranks on `nodes` emulated nodes (nodes must divide
  // DP x PP).
  int dp = 4;
  int pp = 2;
  int nodes = 4;
  std::string job = "local-job";
  // Extra falcon_train flags (e.g. "--steps=200", "--micro-batches=32", "--faults=..."). The
  // cluster sets --dp, --pp, --nodes, --job, --agent_socket, --json_log, --rank_table and
  // --checkpoint_dir (checkpoint_dir(): where an S4 directive's relative checkpoint directory
  // resolves) itself; a flag given here wins.
  std::vector<std::string> trainer_args;
  // Extra falcon_controller flags (e.g. "--mitigation=false", "--profiling_iterations=5").
  std::vector<std::string> controller_args;
  // Extra falcon_agent flags (every agent).
  std::vector<std::string> agent_args;
  // The nodes to run on (cluster/cluster_spec.h), made by the caller (cluster::NetnsCluster for
  // network namespaces); it must have `nodes` nodes named node0..node{K-1}. With a netns cluster
  // the controller listens on the cluster's controller_address (its metrics too), each agent
  // runs inside its node's namespace with metrics on the node's address, and the trainer gets
  // --cluster WORK/cluster.json (ranks in their node's namespace, Gloo on its address) and
  // --rank_table WORK/ranks.json. Unset: every process on loopback.
  std::optional<cluster::ClusterSpec> cluster;
  // Make the nodes as a netns cluster (cluster::NetnsCluster, node0..node{K-1}) at Start() and
  // remove it at Stop(), then run as with `cluster` above. Needs root with CAP_NET_ADMIN:
  // Start() returns CheckNetnsSupport()'s kFailedPrecondition otherwise. Tests that set it need
  // tags = ["no-sandbox"] (cluster/netns.h).
  bool make_netns = false;
  // Where the logs, sockets and (by default) the data directory go. Empty: a fresh directory
  // under $TEST_TMPDIR or /tmp, removed by Stop() unless keep_work_dir.
  std::string work_dir;
  bool keep_work_dir = false;
  // Controller RocksDB directory. Empty: WORK/controller-data (fresh).
  std::string data_dir;
  // Binaries. Empty: found in the runfiles (see above).
  std::string controller_binary;
  std::string agent_binary;
  std::string trainer_binary;
  bool start_trainer = true;
  // Mutual TLS between every peer, with a PKI made under WORK/pki (see above; needs openssl and
  // the runfile deploy/pki/falcon-pki.sh, or pki_script). false: plaintext.
  bool tls = false;
  // The PKI script. Empty: found in the runfiles.
  std::string pki_script;
  // How long Start() waits for each process's address line.
  absl::Duration start_timeout = absl::Seconds(60);
  // SIGTERM -> SIGKILL grace in Stop() and RestartController().
  absl::Duration stop_grace = absl::Seconds(5);
};

// Validation sized for CPU ranks: GEMM 128 (plus the trainer's emulated device time), 5 repeats
// (fastest kept), 4 MiB link passes; 100 ms controller tick.
std::vector<std::string> TunedControllerArgs();
// Default job settings for a loaded machine: verification at the paper's 10% (outside load that
// slows every rank alike is an environment shift, docs/algorithms.md#environment-shifts).
falcon::v1::Settings TunedSettings();

class LocalCluster {
 public:
  // Starts everything (see above). kNotFound: a binary (or, with tls, the PKI script) is missing;
  // kFailedPrecondition: tls without openssl in PATH; kInternal: the PKI script failed (its output
  // is in the message); kDeadlineExceeded or kInternal: a process did not come up (its log's tail
  // is in the message). Whatever was
  // started is stopped again on error.
  static absl::StatusOr<std::unique_ptr<LocalCluster>> Start(LocalClusterOptions options);
  ~LocalCluster();  // Stop().
  LocalCluster(const LocalCluster&) = delete;
  LocalCluster& operator=(const LocalCluster&) = delete;

  // Starts the trainer launcher (when options.start_trainer was false, or after it exited).
  // kFailedPrecondition: it is running.
  absl::Status StartTrainer();
  // Whether the launcher still runs; its exit status once it has exited (-signal when killed).
  bool TrainerRunning();
  std::optional<int> TrainerExitCode();
  // Waits up to `timeout` for the launcher to exit; kDeadlineExceeded when it did not.
  absl::StatusOr<int> WaitTrainer(absl::Duration timeout);
  // SIGTERM (then SIGKILL after the grace) to the trainer only.
  void StopTrainer();

  // Stops the controller (SIGTERM, SIGKILL after the grace; or SIGKILL at once when `kill`) and
  // starts it again on the same data directory and, if it can be bound, the same port (the agents
  // reconnect on their own). The address may change when the port was taken meanwhile. Its earlier
  // log moves to log_path("controller") + ".N" (the first free N).
  absl::Status RestartController(bool kill = false);
  // Stops agent `node` (SIGTERM and its drain, or SIGKILL at once when `kill`) and starts it again
  // with the same flags, socket and node name (so the same agent id); the shims reconnect on
  // their own. Its earlier log moves to log_path("agent-nodeK") + ".N" (the first free N);
  // agent_metrics()[node] is updated. kInvalidArgument: no such node.
  absl::Status RestartAgent(int node, bool kill = false);

  // Stops trainer, agents and controller (in that order); idempotent. Removes the work
  // directory unless keep_work_dir.
  void Stop();

  // Sets the controller's settings (settings.job empty: the defaults for new jobs; set them
  // before StartTrainer() so the job starts with them). kUnavailable / the RPC's error otherwise.
  absl::Status SetSettings(const falcon::v1::Settings& settings);

  // Process ids of the running children (controller, agents, trainer launcher), for checks.
  std::vector<pid_t> pids();

  const std::string& controller_address() const { return controller_address_; }
  const std::string& controller_metrics() const { return controller_metrics_; }  // HOST:PORT
  const std::vector<std::string>& agent_metrics() const { return agent_metrics_; }
  // A Control stub on controller_address(): with tls presenting the kTlsOperator certificate.
  std::unique_ptr<falcon::v1::Control::Stub> NewControlStub() const;
  // With tls: the PKI directory (WORK/pki), and the files of certificate `name` in it
  // (NAME.pem, NAME.key, ca.pem; "controller", "node0", ..., kTlsOperator, or one made by
  // MakeClientCertificate). Empty / plaintext files without tls.
  const std::string& pki_dir() const { return pki_dir_; }
  proto::TlsFiles tls_files(const std::string& name) const;
  // With tls: makes a falconctl user's client certificate (CN `name`, OU `role`: "operator" or
  // "viewer") with the cluster CA and returns its files, for a test that calls the Control API as
  // another identity. kFailedPrecondition without tls; kInternal when the script fails (its
  // output, e.g. a bad name or an existing file, in the message).
  absl::StatusOr<proto::TlsFiles> MakeClientCertificate(const std::string& name,
                                                        const std::string& role);
  std::string agent_socket(int node) const;
  const std::string& work_dir() const { return work_dir_; }
  const std::string& data_dir() const { return data_dir_; }
  std::string trainer_json_log() const { return work_dir_ + "/train.jsonl"; }
  // The cluster's description and the trainer's rank table (both under the work directory);
  // with a loopback cluster (no options.cluster) the description names node0.. on 127.0.0.1.
  std::string cluster_spec_path() const { return work_dir_ + "/cluster.json"; }
  std::string rank_table_path() const { return work_dir_ + "/ranks.json"; }
  // The trainer's --checkpoint_dir: its final checkpoint, and the base of the relative checkpoint
  // directory of an S4 directive (the controller's --s4_checkpoint_dir, default falcon-s4).
  std::string checkpoint_dir() const { return work_dir_ + "/checkpoints"; }
  const cluster::ClusterSpec& cluster_spec() const { return cluster_spec_; }
  std::string log_path(const std::string& name) const;  // "controller", "agent-node0", "trainer"
  const LocalClusterOptions& options() const { return options_; }

 private:
  struct Child {
    std::string name;
    std::optional<common::Subprocess> proc;  // Set once spawned.
    std::optional<int> exit_code;            // Code, or -signal; set once reaped.
  };

  explicit LocalCluster(LocalClusterOptions options) : options_(std::move(options)) {}
  absl::Status StartAll();
  // Runs the PKI script with `args` (after the directory); its output goes to WORK/pki.log.
  absl::Status RunPki(const std::vector<std::string>& args);
  // Makes the CA, controller, node and operator certificates that are not in pki_dir_ yet, and
  // control_credentials_.
  absl::Status MakePki();
  // Copies the children's logs to $TEST_UNDECLARED_OUTPUTS_DIR/cluster-logs/<work dir name>/ (the
  // test's outputs, kept by Bazel) before Stop() removes an owned work dir; no-op outside a test.
  void KeepLogs() const;
  // Renames log_path(`name`) to the first free `<log>.N` (N = 1, 2, ...), if it exists.
  absl::Status SetAsideLog(const std::string& name) const;
  absl::Status StartController(int port);
  // Starts agent `node` into agents_[node] (appended when node == agents_.size()).
  absl::Status StartAgent(int node);
  // Starts `argv` with stdin /dev/null, stdout and stderr appended to log_path(`name`), killed
  // with this process (SIGKILL).
  absl::StatusOr<common::Subprocess> Spawn(const std::string& name,
                                           const std::vector<std::string>& argv,
                                           bool new_process_group);
  // Waits until the log of `name` has a line starting with each prefix; returns the rests.
  absl::StatusOr<std::vector<std::string>> AwaitLines(Child& child,
                                                      const std::vector<std::string>& prefixes);
  void StopChild(Child& child, bool kill_now);
  bool Reap(Child& child);  // True when it has exited.

  LocalClusterOptions options_;
  std::string work_dir_;
  bool own_work_dir_ = false;
  std::string data_dir_;
  Child controller_;
  std::vector<Child> agents_;
  Child trainer_;
  std::string controller_address_;
  std::string controller_metrics_;
  std::vector<std::string> agent_metrics_;
  std::string pki_dir_;                           // With tls.
  cluster::ClusterSpec cluster_spec_;             // options.cluster, or loopback nodes.
  std::unique_ptr<cluster::NetnsCluster> netns_;  // With make_netns; removed last by Stop().
  std::shared_ptr<grpc::ChannelCredentials> control_credentials_;
  bool stopped_ = false;
};

// The lines of the file at `path` (a child's log, say) that contain `needle`; none when it cannot
// be read.
std::vector<std::string> LinesWith(const std::string& path, const std::string& needle);

// The path of a runfile ("controller/falcon_controller") of the running test or binary, or
// kNotFound.
absl::StatusOr<std::string> FindRunfile(const std::string& path);

}  // namespace falcon::tests::harness

#endif  // FALCON_TESTS_HARNESS_LOCAL_CLUSTER_H_
