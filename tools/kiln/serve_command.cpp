#include "tools/kiln/serve_command.h"

#include <httplib.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "core/app/presentation/dashboard_api.h"
#include "core/config/schema.h"
#include "core/store/history/reader.h"
#include "core/util/error.h"
#include "core/util/stop_signal.h"
#include "tools/kiln/web_assets.h"

namespace kiln {

namespace {

struct ServeOptions {
  std::string db = default_run_db();  // KILN_DB, else runs/kiln.db, as every --db
  std::string host = "127.0.0.1";
  int port = 6006;
};

bool is_loopback(const std::string& host) {
  return host == "127.0.0.1" || host == "localhost" || host == "::1";
}

const WebAsset* find_asset(const std::string& path) {
  const std::string wanted = path == "/" ? "/index.html" : path;
  for (const WebAsset* asset = kWebAssets; asset->path; ++asset)
    if (wanted == asset->path) return asset;
  return nullptr;
}

// A page on another site cannot read this one (the browser's same-origin rule), unless it
// points a name of its own at 127.0.0.1 ("DNS rebinding"): then its requests carry its own name
// as Host. Bound to the loopback, the dashboard answers only requests addressed to the loopback.
bool addressed_to_loopback(const httplib::Request& request) {
  std::string host = request.get_header_value("Host");
  if (host.rfind("[::1]", 0) == 0) return true;
  host = host.substr(0, host.rfind(':'));
  return host == "127.0.0.1" || host == "localhost";
}

// Debian's httplib compresses a reply whose type is exactly "application/json" or text/* with
// Brotli at its highest quality when the browser accepts it: half a second for one run's 400 kB
// of rows, on a server that is on the same machine. The API's and scripts' types carry a charset
// (cmake/embed_web.cmake), which it leaves alone.
void add_routes(httplib::Server& server, const ServeOptions& options) {
  // Nothing the page loads comes from anywhere but this server; the API's answers are live.
  server.set_default_headers(
      {{"Content-Security-Policy",
        "default-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:"},
       {"X-Content-Type-Options", "nosniff"},
       {"Cache-Control", "no-store"}});
  if (is_loopback(options.host)) {
    server.set_pre_routing_handler([](const httplib::Request& request, httplib::Response& reply) {
      if (addressed_to_loopback(request)) return httplib::Server::HandlerResponse::Unhandled;
      reply.status = 403;
      reply.set_content("kiln serve answers requests addressed to 127.0.0.1 or localhost only\n",
                        "text/plain");
      return httplib::Server::HandlerResponse::Handled;
    });
  }
  server.Get(R"(/api/([a-z]+))",
             [db = options.db](const httplib::Request& request, httplib::Response& reply) {
               DashboardReply answer = dashboard_api(db, request.matches[1], request.params);
               reply.status = answer.status;
               reply.set_content(answer.body, "application/json; charset=utf-8");
             });
  // Only GET reads; every other method is 405 with the one it allows, so nothing can write.
  const auto refuse_method = [](const httplib::Request& request, httplib::Response& reply) {
    reply.status = 405;
    reply.set_header("Allow", "GET");
    reply.set_content(
        fmt::format("kiln serve only reads: {} is not allowed, GET is\n", request.method),
        "text/plain");
  };
  server.Post(R"(.*)", refuse_method);
  server.Put(R"(.*)", refuse_method);
  server.Patch(R"(.*)", refuse_method);
  server.Delete(R"(.*)", refuse_method);
  server.Options(R"(.*)", refuse_method);
  server.Get(R"(.*)", [](const httplib::Request& request, httplib::Response& reply) {
    if (const WebAsset* asset = find_asset(request.path)) {
      reply.set_content(reinterpret_cast<const char*>(asset->data), asset->size,
                        asset->content_type);
      return;
    }
    reply.status = 404;
    reply.set_content(
        "not found: the dashboard serves /, /index.html, /app.js, /style.css and "
        "its uPlot files\n",
        "text/plain");
  });
}

int serve(const ServeOptions& options) {
  {
    // A mistyped --db is one error line now, not a page of errors later.
    HistoryDb store(options.db);
    if (!store.warning().empty()) std::cerr << "kiln: warning: " << store.warning() << "\n";
  }
  httplib::Server server;
  // Requests carry no body (GET), so a body over 4 KiB is 413 unread; a target over 8 KiB is
  // httplib's own 414 (CPPHTTPLIB_REQUEST_URI_MAX_LENGTH).
  server.set_payload_max_length(4096);
  // httplib's default sets SO_REUSEPORT, with which a second server on a port in use starts too
  // and the kernel splits the requests between them. SO_REUSEADDR alone still allows a restart
  // on a port in TIME_WAIT, and refuses one that is listened on.
  server.set_socket_options([](socket_t socket) {
    int yes = 1;
    ::setsockopt(socket, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
  });
  add_routes(server, options);
  const int port = options.port == 0
                       ? server.bind_to_any_port(options.host)
                       : (server.bind_to_port(options.host, options.port) ? options.port : -1);
  if (port < 0) {
    throw UserError(
        fmt::format("cannot listen on {}:{}: {}: is another server using it? pass "
                    "--port PORT (0 picks a free one)",
                    options.host, options.port, std::strerror(errno)));
  }
  if (!is_loopback(options.host)) {
    std::cerr << fmt::format(
        "kiln: warning: --host {} makes the dashboard reachable from other machines; it has no "
        "login, so anyone who can reach port {} reads every run's config and metrics\n",
        options.host, port);
  }
  const std::string shown_host =
      options.host.find(':') == std::string::npos ? options.host : "[" + options.host + "]";
  StopSignal stop;  // before the line: whoever reads it may stop the server at once
  std::cout << fmt::format("kiln serve: http://{}:{}/ (run store '{}', read-only; Ctrl-C stops)",
                           shown_host, port, options.db)
            << std::endl;
  std::atomic<bool> done{false};
  std::thread listener([&server, &done] {
    server.listen_after_bind();
    done = true;
  });
  while (!StopSignal::requested() && !done)
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  // A stop() that comes before the listener has started accepting is not seen by it: ask again.
  while (!done) {
    server.stop();
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  listener.join();
  return 0;
}

}  // namespace

ChosenCommand add_serve_command(CLI::App& app) {
  auto options = std::make_shared<ServeOptions>();
  CLI::App* serve_app = app.add_subcommand(
      "serve", "a live, read-only dashboard of the run store in the browser (runs, curves)");
  serve_app->add_option("--db", options->db, "run store")->capture_default_str();
  serve_app->add_option("--port", options->port, "port to listen on; 0 picks a free one")
      ->check(CLI::Range(0, 65535))
      ->capture_default_str();
  serve_app
      ->add_option("--host", options->host,
                   "address to listen on; anything but the loopback is reachable from elsewhere")
      ->capture_default_str();
  return [serve_app, options]() -> std::optional<int> {
    if (!serve_app->parsed()) return std::nullopt;
    return serve(*options);
  };
}

}  // namespace kiln
