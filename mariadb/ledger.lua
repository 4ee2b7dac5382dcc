-- sysbench oltp_write_only's transaction (index update, non-index update,
-- delete + insert on the sbtest tables) plus one row of a ledger:
-- (run, thread, seq).  Once COMMIT has returned, seq is appended to
-- $LEDGER_DIR/ack.<run>.<thread>: the transactions the server acknowledged,
-- which must all be there after a crash.
--   LEDGER_DIR (default .), LEDGER_RUN (default 1): set by the harness.
require("oltp_common")

local ledger_dir = os.getenv("LEDGER_DIR") or "."
local ledger_run = tonumber(os.getenv("LEDGER_RUN") or "1")

function prepare_statements()
   prepare_begin()
   prepare_commit()
   prepare_index_updates()
   prepare_non_index_updates()
   prepare_delete_inserts()
end

local base_thread_init = thread_init
function thread_init()
   base_thread_init()
   seq = 0
   ack = assert(io.open(string.format("%s/ack.%d.%d", ledger_dir, ledger_run, sysbench.tid), "a"))
end

function event()
   begin()
   execute_index_updates()
   execute_non_index_updates()
   execute_delete_inserts()
   seq = seq + 1
   con:query(string.format("INSERT INTO ledger (run, t, s) VALUES (%d, %d, %d)",
                           ledger_run, sysbench.tid, seq))
   commit()
   ack:write(seq, "\n")
   ack:flush()
end
