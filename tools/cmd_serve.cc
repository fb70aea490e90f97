// tessera serve: host a model and a local device for remote:HOST:PORT clients
// (backends/remote/server.h); tessera keygen: make CURVE key pairs for it.
#include <csignal>
#include <cstdio>
#include <ctime>

#include "api/internal.h"
#include "backends/registry.h"
#include "backends/remote/server.h"
#include "backends/remote/zmq_transport.h"
#include "graph/format/model_file.h"
#include "scheduler/profile.h"
#include "tools/cli.h"
#include "tools/commands.h"

namespace tessera::tools {

namespace {

const std::vector<cli::FlagSpec> kServeFlags = {
    {"--device", "-d", true, false, "the local device that runs the layers (default cpu)"},
    {"--bind", "", true, false,
     "address to listen on (default 127.0.0.1; any other needs --key and --authorised-keys)"},
    {"--port", "-p", true, false, "TCP port (default 5555)"},
    {"--key", "", true, false, "the server's CURVE key file (NAME.key from tessera keygen)"},
    {"--authorised-keys", "", true, false,
     "file of client public keys allowed to connect (one per line)"},
    {"--max-message-mb", "", true, false, "largest request read, in MiB (default 1024)"},
    {"--max-run-ms", "", true, false, "longest a run may take, whatever its budget (60000)"},
    {"--help", "-h", false, false, "show this help"},
};

const std::vector<cli::FlagSpec> kKeygenFlags = {
    {"--help", "-h", false, false, "show this help"},
};

std::atomic<bool> g_stop{false};
extern "C" void on_signal(int) {
  g_stop.store(true);
}

void log_line(const std::string& line) {
  std::time_t now = std::time(nullptr);
  char ts[32];
  std::strftime(ts, sizeof ts, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  std::fprintf(stderr, "%s tessera serve: %s\n", ts, line.c_str());
}

}  // namespace

int cmd_serve(int argc, char** argv) {
  auto args = cli::parse(argc, argv, 2, kServeFlags);
  if (!args.ok()) return report_error("serve", args.status());
  if (args->has("--help") || args->positional.size() != 1) {
    std::printf(
        "usage: tessera serve MODEL.tsr [--device cpu] [--bind 127.0.0.1] [--port 5555]\n"
        "                     [--key server.key --authorised-keys clients.txt]\n\n"
        "Hosts the model and one local device for remote:HOST:PORT devices of other Tessera\n"
        "processes (same model file, same build): they compile layer sets of the model here,\n"
        "run them on tensors they send (packed or raw), and profile them per layer.\n"
        "Without keys the server listens on loopback only; with --key and --authorised-keys\n"
        "every connection is CURVE-encrypted and only the listed client keys get in.\n"
        "docs/remote.md has the protocol and its limits.\n\n%s",
        cli::usage(kServeFlags).c_str());
    return args->has("--help") ? 0 : 2;
  }
  const std::string path = args->positional[0];
  auto loaded = load_model_file(path);
  if (!loaded.ok()) return report_error("serve", loaded.status().with_context(path));
  auto model = Model::from_graph(std::move(loaded->graph));
  if (!model.ok()) return report_error("serve", model.status().with_context(path));
  auto hash = model_file_hash(path);
  if (!hash.ok()) return report_error("serve", hash.status());
  auto port = args->get_int("--port", 5555, 1, 65535);
  if (!port.ok()) return report_error("serve", port.status());
  auto max_mb = args->get_int("--max-message-mb", 1024, 1, 16384);
  if (!max_mb.ok()) return report_error("serve", max_mb.status());
  auto max_run = args->get_double("--max-run-ms", 60000, 1, 86400000);
  if (!max_run.ok()) return report_error("serve", max_run.status());
  auto device = open_device(args->get("--device", "cpu"));
  if (!device.ok()) return report_error("serve", device.status());

  remote::ServerOptions so;
  so.model_hash = *hash;
  so.caps.max_message_bytes = static_cast<uint64_t>(*max_mb) << 20;
  so.max_run_ms = *max_run;
  const std::string device_name = (*device)->name();
  auto server = remote::RemoteServer::create(model_graph(**model), std::move(*device), so);
  if (!server.ok()) return report_error("serve", server.status());

  remote::ZmqServerOptions zo;
  zo.bind_host = args->get("--bind", "127.0.0.1");
  zo.port = *port;
  zo.log = log_line;
  if (args->has("--key") != args->has("--authorised-keys")) {
    return report_error("serve", invalid_argument("--key and --authorised-keys go together"));
  }
  if (args->has("--key")) {
    if (!remote::curve_available()) {
      return report_error("serve", unimplemented("this libzmq has no CURVE: serve on loopback "
                                                 "without --key"));
    }
    auto keys = remote::read_key_file(args->get("--key"));
    if (!keys.ok()) return report_error("serve", keys.status());
    if (keys->secret_key.empty()) {
      return report_error("serve", invalid_argument("--key: give the .key file (it holds the "
                                                    "secret key), not the .pub"));
    }
    auto clients = remote::read_authorised_keys(args->get("--authorised-keys"));
    if (!clients.ok()) return report_error("serve", clients.status());
    zo.server_keys = *keys;
    zo.authorised_clients = *clients;
  }
  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);
  zo.on_bound = [](const std::string& ep) { log_line("listening on " + ep); };
  log_line("model " + path + " (" + *hash + "), device " + device_name + ", " +
           (zo.server_keys ? "CURVE with " + std::to_string(zo.authorised_clients.size()) +
                                 " authorised client keys"
                           : std::string("plaintext (loopback only)")));
  Status st = remote::serve_zmq(**server, zo, &g_stop);
  if (!st.ok()) return report_error("serve", st);
  const remote::ServerStats stats = (*server)->stats();
  log_line("stopped after " + std::to_string(stats.requests) + " requests (" +
           std::to_string(stats.errors) + " errors, " + std::to_string(stats.dropped) +
           " sessions dropped)");
  return 0;
}

int cmd_keygen(int argc, char** argv) {
  auto args = cli::parse(argc, argv, 2, kKeygenFlags);
  if (!args.ok()) return report_error("keygen", args.status());
  if (args->has("--help") || args->positional.size() != 1) {
    std::printf(
        "usage: tessera keygen NAME\n\n"
        "Writes a CURVE key pair for tessera serve and remote devices: NAME.key (public and\n"
        "secret key, mode 0600; keep it on its machine) and NAME.pub (the public key, to pin on\n"
        "clients as TESSERA_REMOTE_SERVER_KEY, or to list in a server's --authorised-keys).\n");
    return args->has("--help") ? 0 : 2;
  }
  auto keys = remote::generate_curve_keys();
  if (!keys.ok()) return report_error("keygen", keys.status());
  Status st = remote::write_key_files(args->positional[0], *keys);
  if (!st.ok()) return report_error("keygen", st);
  std::printf("wrote %s.key and %s.pub (public key %s)\n", args->positional[0].c_str(),
              args->positional[0].c_str(), keys->public_key.c_str());
  return 0;
}

}  // namespace tessera::tools
