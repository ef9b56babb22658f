#include "lattice/status.h"

static const char *const messages[LATTICE_STATUS_COUNT_] = {
    [LATTICE_OK] = "ok",
    [LATTICE_ERR_NOMEM] = "out of memory",
    [LATTICE_ERR_INVAL] = "invalid argument",
    [LATTICE_ERR_NOT_FOUND] = "not found",
    [LATTICE_ERR_EXISTS] = "already exists",
    [LATTICE_ERR_REGION_FULL] = "data region full",
    [LATTICE_ERR_TOO_LARGE] = "too large",
    [LATTICE_ERR_AGAIN] = "temporarily unavailable, retry",
    [LATTICE_ERR_NOT_OWNER] = "not the owner of this partition",
    [LATTICE_ERR_TIMEOUT] = "timed out",
    [LATTICE_ERR_IO] = "input/output error",
    [LATTICE_ERR_PROTO] = "protocol error",
    [LATTICE_ERR_AUTH] = "authentication failed",
    [LATTICE_ERR_CLUSTER] = "peer belongs to another cluster",
    [LATTICE_ERR_PARTITION_LOST] = "partition lost: no copy of it is left",
    [LATTICE_ERR_NO_CACHE] = "no such cache",
    [LATTICE_ERR_STOPPED] = "node is stopped",
    [LATTICE_ERR_UNSUPPORTED] = "operation not supported",
    [LATTICE_ERR_EXPIRED] = "entry expired",
    [LATTICE_ERR_DISK_FULL] = "the data directory cannot take more writes (disk full or IO error); writes refused",
    /* one literal: clang's -Wstring-concatenation takes two in an array for a missing comma */
    [LATTICE_ERR_RESTARTING] = ("the grid is restarting from its data directories: it waits for every baseline server "
                                "to report (or --restart-wait-ms) and for their copies to agree; nothing is served yet"),
    [LATTICE_ERR_NO_QUORUM] = "no quorum: this node reaches no strict majority of the baseline topology",
    [LATTICE_ERR_WRONGTYPE] = "the key holds a value of another type",
    [LATTICE_ERR_ABORTED] = "transaction aborted: a key it read changed before it committed; nothing applied, retry it",
    [LATTICE_ERR_UNKNOWN] = "the commit's answer was lost: the transaction may or may not have applied",
    [LATTICE_ERR_RESERVED_KEY] = "keys that start with byte 0xff are reserved for the grid's own records",
};

const char *lattice_strerror(int status)
{
    if (status < 0 || status >= LATTICE_STATUS_COUNT_ || messages[status] == 0)
        return "unknown status";
    return messages[status];
}
