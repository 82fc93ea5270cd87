"""`ddm status`, `cancel` and `result` take the short ids people see (issue 40 part 4): a unique prefix of
4+ characters names its job, as git and docker take them; an ambiguous one is refused listing the
matches; one that names nothing says so."""

from __future__ import annotations

import json

import redis

from ddm.client import Client
from ddm.ops.cli import main
from ddm.schema.messages import JobSpec


def test_a_unique_prefix_names_its_job_and_an_ambiguous_one_lists_the_matches(env, capsys):
    with Client(settings=env) as client:
        ids = ["abcd1111" + "0" * 24, "abcd2222" + "0" * 24, "ffff0000" + "1" * 24]
        for job_id in ids:
            client.submit(JobSpec(job_id, (3,), steps=2), check=False)
    assert main(["status", "ffff0000", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["job_id"] == ids[2]
    assert main(["status", ids[0], "--json"]) == 0, "a whole id still works"
    capsys.readouterr()
    assert main(["cancel", "abcd2"]) == 0 and ids[1] in capsys.readouterr().out
    assert main(["status", "abcd"]) == 2
    err = capsys.readouterr().err
    assert "abcd starts 2 of them" in err and ids[0] in err and ids[1] in err, err
    assert main(["result", "0123"]) == 1
    assert "no job 0123: no job id is or starts with it" in capsys.readouterr().err
    assert main(["status", "ffff0"[:3]]) == 1
    assert "4 characters or more" in capsys.readouterr().err
    redis.Redis.from_url(env.redis_url).close()
