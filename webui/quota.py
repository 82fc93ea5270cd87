"""Per-key quotas (issue 39 part 4), kept in Redis so that every UI process behind one prefix shares them:

- a rate: jobs a key may submit per minute (`ddm keys create --rate N/min`), as a token bucket that holds
  at most N tokens and gains N a minute. A submit takes one; with none left it is refused (429) with
  the seconds until the next token as Retry-After;
- concurrent jobs (`--max-jobs N`): at most N of the key's jobs queued or running at once; the N+1-th
  submit is refused (429) until one of them ends.

Both are decided inside Redis by one Lua script each, on Redis's own clock (TIME), so two UI processes
taking the last token or the last place at the same instant cannot both get it. The scripts touch only
the key's own records and the job hashes of its jobs (standalone Redis; a Redis Cluster would need the
names hash-tagged alike). A refused submit queues nothing: the checks come before the broker is asked.

    names.api_quota(key_id)  hash  tokens, at (the bucket: tokens left, and the Redis time they were counted)
    names.api_jobs(key_id)   zset  the key's job ids, scored by the Redis time they were reserved; a job
                                   whose hash says it ended, or that has no hash a minute after it was
                                   reserved, is dropped at the next reservation

The per-address limits (DDM_UI_JOBS_PER_MINUTE; wrong tokens) stay in each process: rate_limit.py.
"""

from __future__ import annotations

from typing import NamedTuple

from ddm.schema.messages import JobStatus
from ddm.schema.names import Names

RESERVED_GRACE_S = 60  # a reserved job whose hash has not appeared by then was never queued (a failed submit)
JOBS_RETRY_S = 5  # Retry-After for a full set of concurrent jobs: how long a job takes is not known here
IDLE_EXPIRY_S = 7 * 86400  # a key's job set left untouched this long is forgotten (its jobs have expired)
ENDED = [s.value for s in JobStatus if s.terminal]

# KEYS[1] the bucket; ARGV: capacity, tokens per second, take (1: take one, 0: only read).
# Returns the seconds to wait (as text: a Lua number would come back truncated to an integer) and the
# tokens left; a full bucket for a key never seen.
_BUCKET = """
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local cap, rate, take = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local b = redis.call('HMGET', KEYS[1], 'tokens', 'at')
local tokens = tonumber(b[1]) or cap
local at = tonumber(b[2]) or now
tokens = math.min(cap, tokens + math.max(0, now - at) * rate)
local wait = 0
if take > 0 then
  if tokens >= 1 then tokens = tokens - 1 else wait = (1 - tokens) / rate end
  redis.call('HSET', KEYS[1], 'tokens', string.format('%.6f', tokens), 'at', string.format('%.6f', now))
  redis.call('EXPIRE', KEYS[1], math.ceil(cap / rate) + 60)
end
return {string.format('%.6f', wait), string.format('%.6f', tokens)}
"""

# KEYS[1] the bucket; ARGV: capacity. Gives back the token of a submit refused after it took one.
_REFUND = """
local tokens = tonumber(redis.call('HGET', KEYS[1], 'tokens'))
if tokens then
  redis.call('HSET', KEYS[1], 'tokens', string.format('%.6f', math.min(tonumber(ARGV[1]), tokens + 1)))
end
return 0
"""

# KEYS[1] the key's job set; ARGV: the job hashes' name up to the id, the limit (0: only count), the new
# job id, the grace for a reserved job with no hash yet, the idle expiry, then the ended statuses.
# Drops the ended jobs, then adds the new one if fewer than the limit are active. Returns the number
# active before it (so: refused when it equals the limit).
_RESERVE = """
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local head, limit, job, grace = ARGV[1], tonumber(ARGV[2]), ARGV[3], tonumber(ARGV[4])
local ended = {}
for i = 6, #ARGV do ended[ARGV[i]] = true end
local members = redis.call('ZRANGE', KEYS[1], 0, -1, 'WITHSCORES')
local active = 0
for i = 1, #members, 2 do
  local status = redis.call('HGET', head .. members[i], 'status')
  if (status and ended[status]) or (not status and now - tonumber(members[i + 1]) > grace) then
    redis.call('ZREM', KEYS[1], members[i])
  else
    active = active + 1
  end
end
if limit > 0 and active < limit then
  redis.call('ZADD', KEYS[1], now, job)
  redis.call('EXPIRE', KEYS[1], tonumber(ARGV[5]))
end
return active
"""


class QuotaLeft(NamedTuple):
    """What a key has left now (GET /api/me): None where the key has no such limit."""

    rate_per_min: int | None
    tokens: float | None
    max_jobs: int | None
    active_jobs: int


class Quotas:
    """The quotas of one prefix's keys (the records' rate_per_min and max_jobs: schema/api_keys.py)."""

    def __init__(self, redis, names: Names):
        self.redis = redis
        self.names = names
        self._bucket = redis.register_script(_BUCKET)
        self._refund = redis.register_script(_REFUND)
        self._reserve = redis.register_script(_RESERVE)

    def take(self, key_id: str, rate_per_min: int) -> float:
        """Take one submit from the key's bucket: 0.0 if taken, else the seconds until one is there."""
        wait, _ = self._bucket(keys=[self.names.api_quota(key_id)], args=[rate_per_min, rate_per_min / 60, 1])
        return float(wait)

    def refund(self, key_id: str, rate_per_min: int) -> None:
        """Give back a taken submit (the job was refused for another reason: nothing was queued)."""
        self._refund(keys=[self.names.api_quota(key_id)], args=[rate_per_min])

    def reserve(self, key_id: str, job_id: str, max_jobs: int) -> int | None:
        """Count `job_id` among the key's active jobs if fewer than `max_jobs` are; None if it was, else how
        many are active (all of its places taken)."""
        active = self._active(key_id, max_jobs, job_id)
        return None if active < max_jobs else active

    def release(self, key_id: str, job_id: str) -> None:
        """Give a reserved place back (the job was not queued after all)."""
        self.redis.zrem(self.names.api_jobs(key_id), job_id)

    def left(self, key_id: str, rate_per_min: int | None, max_jobs: int | None) -> QuotaLeft:
        tokens = None
        if rate_per_min is not None:
            _, text = self._bucket(
                keys=[self.names.api_quota(key_id)], args=[rate_per_min, rate_per_min / 60, 0]
            )
            tokens = float(text)
        return QuotaLeft(rate_per_min, tokens, max_jobs, self._active(key_id, 0, ""))

    def _active(self, key_id: str, limit: int, job_id: str) -> int:
        head = self.names.job("0").removesuffix("0")  # the job hashes' name up to the id
        args = [head, limit, job_id, RESERVED_GRACE_S, IDLE_EXPIRY_S, *ENDED]
        return int(self._reserve(keys=[self.names.api_jobs(key_id)], args=args))
