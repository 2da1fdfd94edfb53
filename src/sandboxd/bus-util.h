/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <systemd/sd-bus.h>

#include "error-table.h"
#include "request.h"

/* The names of the D-Bus API's errors, documented in sandboxd-dbus(5); each is a row of the
 * error table (error-table.c), or another name for one (NoSuchCommand, ExecutableNotFound,
 * InvalidArguments). Authorization failures use the standard
 * org.freedesktop.DBus.Error.AccessDenied and
 * org.freedesktop.DBus.Error.InteractiveAuthorizationRequired, which clients map to EACCES. */
#define BUS_ERROR_NO_SUCH_SESSION BUS_ERROR_PREFIX "NoSuchSession"
#define BUS_ERROR_WRONG_NODE BUS_ERROR_PREFIX "WrongNode"
#define BUS_ERROR_NO_SUCH_COMMAND BUS_ERROR_PREFIX "NoSuchCommand"
#define BUS_ERROR_NO_SUCH_FILE BUS_ERROR_PREFIX "NoSuchFile"
#define BUS_ERROR_INVALID_ARGUMENTS BUS_ERROR_PREFIX "InvalidArguments"
#define BUS_ERROR_INVALID_NAME BUS_ERROR_PREFIX "InvalidName"
#define BUS_ERROR_INVALID_TYPE BUS_ERROR_PREFIX "InvalidType"
#define BUS_ERROR_INVALID_VALUE BUS_ERROR_PREFIX "InvalidValue"
#define BUS_ERROR_UNKNOWN_OPTION BUS_ERROR_PREFIX "UnknownOption"
#define BUS_ERROR_INVALID_PATH BUS_ERROR_PREFIX "InvalidPath"
#define BUS_ERROR_RESERVED_ENVIRONMENT BUS_ERROR_PREFIX "ReservedEnvironment"
#define BUS_ERROR_LIMIT_EXCEEDED BUS_ERROR_PREFIX "LimitExceeded"
#define BUS_ERROR_EXECUTABLE_NOT_FOUND BUS_ERROR_PREFIX "ExecutableNotFound"
#define BUS_ERROR_NOT_SUPPORTED BUS_ERROR_PREFIX "NotSupported"
#define BUS_ERROR_SESSION_NOT_ACTIVE BUS_ERROR_PREFIX "SessionNotActive"
#define BUS_ERROR_DRAINING BUS_ERROR_PREFIX "Draining"
#define BUS_ERROR_STOPPING BUS_ERROR_PREFIX "Stopping"
#define BUS_ERROR_OVERLOADED BUS_ERROR_PREFIX "Overloaded"
#define BUS_ERROR_TOO_MANY_SESSIONS BUS_ERROR_PREFIX "TooManySessions"
#define BUS_ERROR_TOO_MANY_RUNNING BUS_ERROR_PREFIX "TooManyRunning"
#define BUS_ERROR_TOO_MANY_COMMANDS BUS_ERROR_PREFIX "TooManyCommands"
#define BUS_ERROR_SPOOL_FULL BUS_ERROR_PREFIX "SpoolFull"
#define BUS_ERROR_SESSION_STARTING BUS_ERROR_PREFIX "SessionStarting"
#define BUS_ERROR_COMMAND_NOT_RUNNING BUS_ERROR_PREFIX "CommandNotRunning"
#define BUS_ERROR_SYSTEMD_FAILED BUS_ERROR_PREFIX "SystemdFailed"
#define BUS_ERROR_BUSY BUS_ERROR_PREFIX "Busy"
#define BUS_ERROR_PURGE_FAILED BUS_ERROR_PREFIX "PurgeFailed"
#define BUS_ERROR_NOT_PURGED BUS_ERROR_PREFIX "NotPurged"
#define BUS_ERROR_FILE_TOO_LARGE BUS_ERROR_PREFIX "FileTooLarge"
#define BUS_ERROR_INVALID_OFFSET BUS_ERROR_PREFIX "InvalidOffset"
#define BUS_ERROR_STDIN_CLOSED BUS_ERROR_PREFIX "StdinClosed"
#define BUS_ERROR_STDIN_NOT_STREAMED BUS_ERROR_PREFIX "StdinNotStreamed"
#define BUS_ERROR_NOT_A_TERMINAL BUS_ERROR_PREFIX "NotATerminal"
#define BUS_ERROR_NOT_A_DIRECTORY BUS_ERROR_PREFIX "NotADirectory"
#define BUS_ERROR_IS_A_DIRECTORY BUS_ERROR_PREFIX "IsADirectory"
#define BUS_ERROR_NOT_A_REGULAR_FILE BUS_ERROR_PREFIX "NotARegularFile"
#define BUS_ERROR_EXISTS BUS_ERROR_PREFIX "Exists"
#define BUS_ERROR_NOT_EMPTY BUS_ERROR_PREFIX "NotEmpty"
#define BUS_ERROR_TOO_MANY_FILE_OPERATIONS BUS_ERROR_PREFIX "TooManyFileOperations"
#define BUS_ERROR_TOO_MANY_TERMINALS BUS_ERROR_PREFIX "TooManyTerminals"
#define BUS_ERROR_INSUFFICIENT_STORAGE BUS_ERROR_PREFIX "InsufficientStorage"
#define BUS_ERROR_PORT_NOT_EXPOSED BUS_ERROR_PREFIX "PortNotExposed"
#define BUS_ERROR_PORT_EXPOSURE_UNAVAILABLE BUS_ERROR_PREFIX "PortExposureUnavailable"
#define BUS_ERROR_TOO_MANY_PORTS BUS_ERROR_PREFIX "TooManyPorts"
#define BUS_ERROR_HOST_PORTS_EXHAUSTED BUS_ERROR_PREFIX "HostPortsExhausted"
#define BUS_ERROR_NO_SUCH_IMAGE BUS_ERROR_PREFIX "NoSuchImage"
#define BUS_ERROR_IMAGE_IN_USE BUS_ERROR_PREFIX "ImageInUse"
#define BUS_ERROR_INVALID_IMAGE BUS_ERROR_PREFIX "InvalidImage"

/* The error of a RequestError (the codes the HTTP API sends in "error.code"): the D-Bus
 * name of the code's row in the error table, or e->bus_name; InvalidValue for a code that
 * has no D-Bus name (one of HTTP only). Without a code, of errno r. Returns a negative
 * errno, like sd_bus_error_set(). */
int bus_error_set_request(sd_bus_error *error, int r, const RequestError *e);
