/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* What sandboxd says of itself: the health and the metrics both front ends answer with. */

#include <inttypes.h>

#include "file-ops.h"
#include "pool.h"
#include "session.h"
#include "status.h"
#include "time-util.h"

bool status_is_ready(Manager *m) {
        return m->bus && sd_bus_is_open(m->bus) > 0;
}

void status_health(Manager *m, StatusHealth *ret) {
        unsigned n = 0;
        Session *s;

        LIST_FOREACH(sessions, s, m->sessions)
                if (s->state == SESSION_ACTIVE)
                        n++;
        *ret = (StatusHealth) {
                .status = m->draining ? "draining" : status_is_ready(m) ? "ok" : "degraded",
                .timestamp_usec = now_usec(CLOCK_REALTIME),
                .uptime_usec = now_usec(CLOCK_MONOTONIC) - m->start_monotonic_usec,
                .sessions = n,
                .running_commands = m->n_running,
        };
}

int status_format_metrics(Manager *m, Buf *b) {
        unsigned by_state[_SESSION_STATE_MAX] = {};
        PoolStats ps;
        Session *s;
        int ret;

        LIST_FOREACH(sessions, s, m->sessions)
                by_state[s->state]++;
        pool_stats(m, &ps);

        /* The node's name (node_name_is_valid(): nothing to escape) on the info gauge and on the
         * two gauges a cluster's dashboards sum by node; the others join on sandboxd_node_info. */
        ret = buf_puts(b, "# HELP sandboxd_sessions Sessions known, by state.\n# TYPE sandboxd_sessions gauge\n");
        for (SessionState st = 0; ret >= 0 && st < _SESSION_STATE_MAX; st++)
                ret = buf_printf(b, "sandboxd_sessions{node=\"%s\",state=\"%s\"} %u\n", m->config.node_name,
                                 session_state_to_string(st), by_state[st]);
        if (ret >= 0)
                ret = buf_printf(b,
                                 "# HELP sandboxd_node_info The name of this node ([Node] Name=), which begins its session ids.\n"
                                 "# TYPE sandboxd_node_info gauge\n"
                                 "sandboxd_node_info{node=\"%s\"} 1\n",
                                 m->config.node_name);
        if (ret >= 0)
                ret = buf_printf(b,
                                 "# HELP sandboxd_commands_running Commands running now.\n"
                                 "# TYPE sandboxd_commands_running gauge\n"
                                 "sandboxd_commands_running{node=\"%s\"} %u\n"
                                 "# HELP sandboxd_pool_slices Prepared session slices, by state.\n"
                                 "# TYPE sandboxd_pool_slices gauge\n"
                                 "sandboxd_pool_slices{state=\"ready\"} %u\n"
                                 "sandboxd_pool_slices{state=\"starting\"} %u\n"
                                 "sandboxd_pool_slices{state=\"in_use\"} %u\n"
                                 "# HELP sandboxd_http_connections Open HTTP connections.\n"
                                 "# TYPE sandboxd_http_connections gauge\n"
                                 "sandboxd_http_connections %u\n"
                                 "# HELP sandboxd_pid1_calls Calls to systemd, sent and not answered or waiting to be sent.\n"
                                 "# TYPE sandboxd_pid1_calls gauge\n"
                                 "sandboxd_pid1_calls{state=\"in_flight\"} %u\n"
                                 "sandboxd_pid1_calls{state=\"waiting\"} %u\n"
                                 "# HELP sandboxd_pid1_jobs Jobs of systemd asked by sandboxd and not finished.\n"
                                 "# TYPE sandboxd_pid1_jobs gauge\n"
                                 "sandboxd_pid1_jobs %u\n"
                                 "# HELP sandboxd_http_requests_waiting HTTP requests waiting for an answer (on systemd, a session, stdin).\n"
                                 "# TYPE sandboxd_http_requests_waiting gauge\n"
                                 "sandboxd_http_requests_waiting %u\n"
                                 "# HELP sandboxd_dbus_calls_waiting D-Bus calls waiting for an answer: on polkit, or on anything else (systemd, a session, a file, a pipe).\n"
                                 "# TYPE sandboxd_dbus_calls_waiting gauge\n"
                                 "sandboxd_dbus_calls_waiting{on=\"polkit\"} %u\n"
                                 "sandboxd_dbus_calls_waiting{on=\"other\"} %u\n"
                                 "# HELP sandboxd_draining 1 while sandboxd drains.\n"
                                 "# TYPE sandboxd_draining gauge\n"
                                 "sandboxd_draining %d\n"
                                 "# HELP sandboxd_uptime_seconds Seconds since this process started.\n"
                                 "# TYPE sandboxd_uptime_seconds gauge\n"
                                 "sandboxd_uptime_seconds %.3f\n"
                                 "# HELP sandboxd_build_info The version running.\n"
                                 "# TYPE sandboxd_build_info gauge\n"
                                 "sandboxd_build_info{version=\"%s\"} 1\n",
                                 m->config.node_name, m->n_running, ps.ready, ps.starting, ps.in_use, m->n_connections,
                                 pid1_gate_in_flight(m->pid1), pid1_gate_waiting(m->pid1), pid1_gate_jobs(m->pid1),
                                 m->n_http_waiting, m->n_polkit_waiting, m->n_bus_waiting,
                                 m->draining,
                                 (double) (now_usec(CLOCK_MONOTONIC) - m->start_monotonic_usec) / USEC_PER_SEC,
                                 PROJECT_VERSION);
        if (ret >= 0) {
                StoreWriterStats ws;

                store_writer_stats(m->writer, &ws);
                ret = buf_printf(b,
                                 "# HELP sandboxd_records_queued Records waiting for the writer thread.\n"
                                 "# TYPE sandboxd_records_queued gauge\n"
                                 "sandboxd_records_queued %u\n"
                                 "# HELP sandboxd_record_write_max_seconds The longest record write, fsync()s included.\n"
                                 "# TYPE sandboxd_record_write_max_seconds gauge\n"
                                 "sandboxd_record_write_max_seconds %.6f\n"
                                 "# HELP sandboxd_record_writes_total Session and command records written to disk.\n"
                                 "# TYPE sandboxd_record_writes_total counter\n"
                                 "sandboxd_record_writes_total %" PRIu64 "\n"
                                 "# HELP sandboxd_record_write_errors_total Record writes and removals that failed.\n"
                                 "# TYPE sandboxd_record_write_errors_total counter\n"
                                 "sandboxd_record_write_errors_total %" PRIu64 "\n"
                                 "# HELP sandboxd_record_write_seconds_total Time spent writing records, fsync()s included.\n"
                                 "# TYPE sandboxd_record_write_seconds_total counter\n"
                                 "sandboxd_record_write_seconds_total %.6f\n",
                                 ws.queued, (double) ws.write_max_usec / USEC_PER_SEC, ws.writes, ws.errors,
                                 (double) ws.write_usec / USEC_PER_SEC);
        }
        if (ret >= 0) {
                FileOpsStats fs;

                file_ops_stats(m->file_ops, &fs);
                ret = buf_printf(b,
                                 "# HELP sandboxd_file_operations File API operations and disk usage counts off the loop, by state.\n"
                                 "# TYPE sandboxd_file_operations gauge\n"
                                 "sandboxd_file_operations{state=\"queued\"} %u\n"
                                 "sandboxd_file_operations{state=\"running\"} %u\n"
                                 "# HELP sandboxd_file_operations_total File operations done, or refused for want of room.\n"
                                 "# TYPE sandboxd_file_operations_total counter\n"
                                 "sandboxd_file_operations_total{result=\"done\"} %" PRIu64 "\n"
                                 "sandboxd_file_operations_total{result=\"refused\"} %" PRIu64 "\n",
                                 fs.queued, fs.running, fs.done, fs.refused);
        }
        if (ret >= 0)
                ret = metrics_format(&m->metrics, b);
        return ret < 0 ? ret : 0;
}
