/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <errno.h>
#include <string.h>

#include "error-table.h"
#include "macro.h"

#define E(n) BUS_ERROR_PREFIX n

static const ApiError table[] = {
        /* the request is wrong */
        { "invalid_json", EINVAL, 400, NULL, SANDBOXD_ERROR_INVALID },
        { "invalid_type", EINVAL, 400, E("InvalidType"), SANDBOXD_ERROR_INVALID },
        { "invalid_value", EINVAL, 400, E("InvalidValue"), SANDBOXD_ERROR_INVALID },
        { "invalid_name", EINVAL, 400, E("InvalidName"), SANDBOXD_ERROR_INVALID },
        { "invalid_path", EINVAL, 400, E("InvalidPath"), SANDBOXD_ERROR_INVALID },
        { "invalid_url", EINVAL, 400, NULL, SANDBOXD_ERROR_INVALID },
        { "invalid_request", EINVAL, 400, NULL, SANDBOXD_ERROR_INVALID },
        { "missing_field", EINVAL, 400, NULL, SANDBOXD_ERROR_INVALID },
        { "unknown_field", EINVAL, 400, E("UnknownOption"), SANDBOXD_ERROR_INVALID },
        { "reserved_env", EINVAL, 400, E("ReservedEnvironment"), SANDBOXD_ERROR_INVALID },
        { "limit_exceeded", EINVAL, 400, E("LimitExceeded"), SANDBOXD_ERROR_INVALID },
        { "invalid_image", EINVAL, 400, E("InvalidImage"), SANDBOXD_ERROR_INVALID },
        { "method_not_allowed", EINVAL, 405, NULL, SANDBOXD_ERROR_INVALID },
        { "unsupported_media_type", EINVAL, 415, NULL, SANDBOXD_ERROR_INVALID },
        { "unsupported_encoding", EINVAL, 415, NULL, SANDBOXD_ERROR_INVALID },
        { "payload_too_large", EFBIG, 413, E("FileTooLarge"), SANDBOXD_ERROR_TOO_LARGE },
        { "upgrade_required", EPROTO, 426, NULL, SANDBOXD_ERROR_INVALID },
        { "invalid_offset", ERANGE, 416, E("InvalidOffset"), SANDBOXD_ERROR_RANGE },
        /* who asks */
        { "unauthorized", EKEYREJECTED, 401, NULL, SANDBOXD_ERROR_UNAUTHORIZED },
        { "forbidden", EACCES, 403, SD_BUS_ERROR_ACCESS_DENIED, SANDBOXD_ERROR_FORBIDDEN },
        /* what is asked about */
        { "not_found", ENOENT, 404, E("NoSuchSession"), SANDBOXD_ERROR_NOT_FOUND },
        { "wrong_node", EREMOTE, 421, E("WrongNode"), SANDBOXD_ERROR_WRONG_NODE },
        { "executable_not_found", ENOENT, 400, E("ExecutableNotFound"), SANDBOXD_ERROR_INVALID },
        { "session_not_active", EBUSY, 409, E("SessionNotActive"), SANDBOXD_ERROR_CONFLICT },
        { "session_starting", EBUSY, 409, E("SessionStarting"), SANDBOXD_ERROR_CONFLICT },
        { "busy", EBUSY, 409, E("Busy"), SANDBOXD_ERROR_CONFLICT },
        { "not_purged", EBUSY, 409, E("NotPurged"), SANDBOXD_ERROR_CONFLICT },
        { "not_running", ESRCH, 409, E("CommandNotRunning"), SANDBOXD_ERROR_CONFLICT },
        { "stdin_closed", EPIPE, 409, E("StdinClosed"), SANDBOXD_ERROR_CONFLICT },
        { "stdin_not_streamed", EBADF, 409, E("StdinNotStreamed"), SANDBOXD_ERROR_CONFLICT },
        { "not_a_terminal", ENOTTY, 409, E("NotATerminal"), SANDBOXD_ERROR_CONFLICT },
        { "not_a_directory", ENOTDIR, 409, E("NotADirectory"), SANDBOXD_ERROR_CONFLICT },
        { "is_a_directory", EISDIR, 409, E("IsADirectory"), SANDBOXD_ERROR_CONFLICT },
        { "not_a_regular_file", EBADFD, 409, E("NotARegularFile"), SANDBOXD_ERROR_CONFLICT },
        { "exists", EEXIST, 409, E("Exists"), SANDBOXD_ERROR_CONFLICT },
        { "not_empty", ENOTEMPTY, 409, E("NotEmpty"), SANDBOXD_ERROR_CONFLICT },
        { "port_exposure_unavailable", ENOTSUP, 409, E("PortExposureUnavailable"), SANDBOXD_ERROR_CONFLICT },
        { "port_not_exposed", ENOENT, 404, E("PortNotExposed"), SANDBOXD_ERROR_NOT_FOUND },
        { "image_not_found", ENOENT, 404, E("NoSuchImage"), SANDBOXD_ERROR_NOT_FOUND },
        { "image_in_use", EBUSY, 409, E("ImageInUse"), SANDBOXD_ERROR_CONFLICT },
        /* quotas */
        { "too_many_sessions", EUSERS, 429, E("TooManySessions"), SANDBOXD_ERROR_INVALID },
        { "too_many_running", EBUSY, 429, E("TooManyRunning"), SANDBOXD_ERROR_INVALID },
        { "too_many_commands", EBUSY, 429, E("TooManyCommands"), SANDBOXD_ERROR_INVALID },
        { "too_many_file_operations", EBUSY, 429, E("TooManyFileOperations"), SANDBOXD_ERROR_INVALID },
        { "too_many_terminals", EBUSY, 429, E("TooManyTerminals"), SANDBOXD_ERROR_INVALID },
        { "too_many_ports", EBUSY, 429, E("TooManyPorts"), SANDBOXD_ERROR_INVALID },
        { "too_many_relays", EBUSY, 429, NULL, SANDBOXD_ERROR_INVALID },
        { "spool_full", ENOSPC, 507, E("SpoolFull"), SANDBOXD_ERROR_SERVER },
        { "insufficient_storage", ENOSPC, 507, E("InsufficientStorage"), SANDBOXD_ERROR_SERVER },
        /* sandboxd, systemd, this host */
        { "draining", EAGAIN, 503, E("Draining"), SANDBOXD_ERROR_UNAVAILABLE },
        { "overloaded", EAGAIN, 503, E("Overloaded"), SANDBOXD_ERROR_UNAVAILABLE },
        { "host_ports_exhausted", EADDRNOTAVAIL, 503, E("HostPortsExhausted"), SANDBOXD_ERROR_UNAVAILABLE },
        /* what an exposed port serves, relayed */
        { "upstream_unavailable", ECONNREFUSED, 502, NULL, SANDBOXD_ERROR_SYSTEMD },
        { "upstream_timeout", ETIMEDOUT, 504, NULL, SANDBOXD_ERROR_UNAVAILABLE },
        { "stopping", EAGAIN, 503, E("Stopping"), SANDBOXD_ERROR_UNAVAILABLE },
        { "unsupported", EOPNOTSUPP, 501, E("NotSupported"), SANDBOXD_ERROR_UNSUPPORTED },
        { "not_implemented", EOPNOTSUPP, 501, NULL, SANDBOXD_ERROR_UNSUPPORTED },
        { "systemd_failed", EREMOTEIO, 502, E("SystemdFailed"), SANDBOXD_ERROR_SYSTEMD },
        { "purge_failed", EIO, 500, E("PurgeFailed"), SANDBOXD_ERROR_SERVER },
        { "internal", EIO, 500, NULL, SANDBOXD_ERROR_SERVER },
};

static const ApiErrorAlias aliases[] = {
        { E("NoSuchCommand"), "not_found" },
        { E("NoSuchFile"), "not_found" },
        { E("InvalidArguments"), "invalid_type" },
        { SD_BUS_ERROR_INTERACTIVE_AUTHORIZATION_REQUIRED, "forbidden" },
};

const ApiError *api_error_table(size_t *ret_n) {
        *ret_n = ELEMENTSOF(table);
        return table;
}

const ApiErrorAlias *api_error_bus_aliases(size_t *ret_n) {
        *ret_n = ELEMENTSOF(aliases);
        return aliases;
}

const ApiError *api_error_from_code(const char *code) {
        if (!code)
                return NULL;
        for (size_t i = 0; i < ELEMENTSOF(table); i++)
                if (streq(table[i].code, code))
                        return &table[i];
        return NULL;
}

const ApiError *api_error_from_bus_name(const char *name) {
        if (!name)
                return NULL;
        for (size_t i = 0; i < ELEMENTSOF(table); i++)
                if (table[i].bus_name && streq(table[i].bus_name, name))
                        return &table[i];
        for (size_t i = 0; i < ELEMENTSOF(aliases); i++)
                if (streq(aliases[i].bus_name, name))
                        return api_error_from_code(aliases[i].code);
        return NULL;
}

/* Only sandboxd's own names: sd-bus maps the standard ones itself (AccessDenied and
 * InteractiveAuthorizationRequired to EACCES, as the forbidden row says). */
const sd_bus_error_map *api_error_bus_map(void) {
        static sd_bus_error_map map[ELEMENTSOF(table) + ELEMENTSOF(aliases) + 1];
        size_t n = 0;

        if (map[0].name)
                return map;
        for (size_t i = 0; i < ELEMENTSOF(table); i++)
                if (table[i].bus_name && strncmp(table[i].bus_name, BUS_ERROR_PREFIX, strlen(BUS_ERROR_PREFIX)) == 0)
                        map[n++] = (sd_bus_error_map) SD_BUS_ERROR_MAP(table[i].bus_name, table[i].errno_value);
        for (size_t i = 0; i < ELEMENTSOF(aliases); i++)
                if (strncmp(aliases[i].bus_name, BUS_ERROR_PREFIX, strlen(BUS_ERROR_PREFIX)) == 0)
                        map[n++] = (sd_bus_error_map) SD_BUS_ERROR_MAP(aliases[i].bus_name,
                                                                       api_error_from_code(aliases[i].code)->errno_value);
        map[n] = (sd_bus_error_map) SD_BUS_ERROR_MAP_END;
        return map;
}

sandboxd_error_kind api_error_kind_from_http(long status) {
        switch (status) {
        case 400:
        case 405:
        case 411:
        case 415:
        case 422:
                return SANDBOXD_ERROR_INVALID;
        case 401:
                return SANDBOXD_ERROR_UNAUTHORIZED;
        case 403:
                return SANDBOXD_ERROR_FORBIDDEN;
        case 404:
        case 410:
                return SANDBOXD_ERROR_NOT_FOUND;
        case 409:
                return SANDBOXD_ERROR_CONFLICT;
        case 421:
                return SANDBOXD_ERROR_WRONG_NODE;
        case 413:
                return SANDBOXD_ERROR_TOO_LARGE;
        case 416:
                return SANDBOXD_ERROR_RANGE;
        case 501:
                return SANDBOXD_ERROR_UNSUPPORTED;
        case 502:
                return SANDBOXD_ERROR_SYSTEMD;
        case 503:
        case 504:
                return SANDBOXD_ERROR_UNAVAILABLE;
        default:
                if (status >= 200 && status < 300)
                        return SANDBOXD_ERROR_NONE;
                if (status >= 400 && status < 500)
                        return SANDBOXD_ERROR_INVALID;
                /* 1xx/3xx are never final answers of sandboxd; 5xx are its own failures */
                return status >= 500 ? SANDBOXD_ERROR_SERVER : SANDBOXD_ERROR_PROTOCOL;
        }
}

int api_error_kind_errno(sandboxd_error_kind kind) {
        switch (kind) {
        case SANDBOXD_ERROR_NONE:
                return 0;
        case SANDBOXD_ERROR_TRANSPORT:
                return -EIO;
        case SANDBOXD_ERROR_PROTOCOL:
                return -EBADMSG;
        case SANDBOXD_ERROR_INVALID:
                return -EINVAL;
        case SANDBOXD_ERROR_UNAUTHORIZED:
                return -EKEYREJECTED;
        case SANDBOXD_ERROR_FORBIDDEN:
                return -EPERM;
        case SANDBOXD_ERROR_NOT_FOUND:
                return -ENOENT;
        case SANDBOXD_ERROR_CONFLICT:
                return -EBUSY;
        case SANDBOXD_ERROR_WRONG_NODE:
                return -EREMOTE;
        case SANDBOXD_ERROR_TOO_LARGE:
                return -EFBIG;
        case SANDBOXD_ERROR_RANGE:
                return -ERANGE;
        case SANDBOXD_ERROR_UNSUPPORTED:
                return -EOPNOTSUPP;
        case SANDBOXD_ERROR_SYSTEMD:
                return -EREMOTEIO;
        case SANDBOXD_ERROR_UNAVAILABLE:
                return -EAGAIN;
        case SANDBOXD_ERROR_CANCELLED:
                return -ECANCELED;
        case SANDBOXD_ERROR_SERVER:
        default:
                return -EPROTO;
        }
}
