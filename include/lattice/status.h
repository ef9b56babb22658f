/*
 * Lattice status codes.  Every fallible function in every module returns one
 * of these, so a caller can tell "retry" (AGAIN, TIMEOUT, NOT_OWNER) from
 * "your request is wrong" (INVAL, TOO_LARGE, NO_CACHE) from "the grid cannot
 * do it now" (REGION_FULL, PARTITION_LOST, NO_QUORUM) from "broken" (IO, PROTO).
 *
 * Values are stable: they travel on the wire in error replies.  Append only.
 */
#ifndef LATTICE_STATUS_H
#define LATTICE_STATUS_H

typedef enum lattice_status {
    LATTICE_OK = 0,
    LATTICE_ERR_NOMEM = 1,          /* an allocation failed; nothing changed */
    LATTICE_ERR_INVAL = 2,          /* bad argument or malformed request */
    LATTICE_ERR_NOT_FOUND = 3,      /* no such key / node / entry */
    LATTICE_ERR_EXISTS = 4,         /* already present (put_if_absent, create) */
    LATTICE_ERR_REGION_FULL = 5,    /* data region full and policy is reject */
    LATTICE_ERR_TOO_LARGE = 6,      /* key, value or message above its limit */
    LATTICE_ERR_AGAIN = 7,          /* transient; retry the same request */
    LATTICE_ERR_NOT_OWNER = 8,      /* this node does not own the partition */
    LATTICE_ERR_TIMEOUT = 9,        /* no answer within the deadline */
    LATTICE_ERR_IO = 10,            /* socket or system call failed */
    LATTICE_ERR_PROTO = 11,         /* undecodable or unexpected message */
    LATTICE_ERR_AUTH = 12,          /* missing or wrong cluster secret */
    LATTICE_ERR_CLUSTER = 13,       /* peer belongs to another cluster name */
    LATTICE_ERR_PARTITION_LOST = 14,/* no copy of the partition is left */
    LATTICE_ERR_NO_CACHE = 15,      /* unknown cache name */
    LATTICE_ERR_STOPPED = 16,       /* node is stopping or not started */
    LATTICE_ERR_UNSUPPORTED = 17,   /* valid request this build refuses */
    LATTICE_ERR_EXPIRED = 18,       /* entry exists but its expiry passed */
    LATTICE_ERR_NO_QUORUM = 19,     /* this node's side of the grid holds no strict majority of the baseline */
    LATTICE_ERR_DISK_FULL = 20,     /* the node's data directory cannot take the write (full disk, IO error) */
    LATTICE_ERR_RESTARTING = 21,    /* whole-grid restart: the grid waits for its baseline's data directories */
    LATTICE_ERR_WRONGTYPE = 22,     /* the key holds a value of another type than the operation's */
    LATTICE_ERR_ABORTED = 23,       /* a transaction met a conflict and applied nothing: safe to retry */
    LATTICE_ERR_UNKNOWN = 24,       /* a commit was sent; whether it applied cannot be told (its answer was lost) */
    LATTICE_ERR_RESERVED_KEY = 25,  /* the key starts with byte 0xff: reserved for the grid's own records */
    LATTICE_STATUS_COUNT_
} lattice_status;

/* A short, stable, human sentence for a status; never NULL. */
const char *lattice_strerror(int status);

#endif
