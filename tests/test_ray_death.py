"""Worker, actor and node deaths, and unavailable actors: who died, how, and one event per death."""

from __future__ import annotations

import pytest

from conftest import REAL, SESSIONS
from oomlens import analyze, parse_text

OOM_KINDS = {"ray_oom_kill", "ray_oom_summary", "cuda_oom", "kernel_oom", "vllm_memory_error"}


def of_kind(events, kind):
    return [e for e in events if e.kind == kind]


def real(name: str):
    (path,) = REAL.glob(f"{name}_*.log")
    return analyze(str(path)).events


def session(name: str):
    return analyze(str(SESSIONS / name)).events


@pytest.mark.parametrize(
    "name,pid,worker_id,files",
    [
        ("ray2.60-c-actor-sigkill", 16772, "8b63c0a84cf0ab895a5e153d7fca601d5a3da96f532355b4432422b2", 3),
        ("ray2.49-c-actor-sigkill", 23010, "bbe3dad66021ea79a8010428d6b62182a10d9820ef2cb05eebbda3a4", 4),
    ],
)
def test_sigkilled_actor_is_one_death_told_by_every_channel(name, pid, worker_id, files):
    (death,) = of_kind(session(name), "ray_worker_died")
    assert (death.pid, death.actor, death.node) == (pid, "CriticModelRayActor", "192.0.2.2")
    f = death.fields
    assert (f["worker_id"], f["exit_type"], f["reason"], f["error"]) == (worker_id, "SYSTEM_ERROR", "worker_died", "connection error code 2")
    assert f["name"] == "critic_0"
    # the raylet line and the ActorDiedError in the driver console, gcs_server.out, events/ (2.49: dashboard_agent.log too)
    paths = [s.path.rsplit("/", 1)[-1] for s in death.sources]
    assert paths.count("driver-console.log") == 2
    assert {"gcs_server.out", "event_RAYLET.log"} <= set(paths)
    assert len(set(paths)) == files
    assert death.time is not None and not death.time_inferred  # gcs_server.out's own stamp


@pytest.mark.parametrize(
    "name,first,second,actor_id",
    [
        ("ray2.60-d-dead-actor-calls", 17356, 17355, "6a1ef7f0c96627153f05fab901000000"),
        ("ray2.49-d-dead-actor-calls", 24067, 24065, "be58edf83e01a3aede6596a201000000"),
    ],
)
def test_restarted_actor_killed_twice(name, first, second, actor_id):
    events = session(name)
    deaths = {e.pid: e for e in of_kind(events, "ray_worker_died")}
    assert set(deaths) == {first, second}
    assert deaths[second].actor == "ActorRolloutRefWorker"
    assert deaths[second].fields["actor_id"] == actor_id
    # two ActorDiedErrors (in flight, then a call to the dead actor) + the raylet message, gcs, events
    assert len(deaths[second].sources) >= 5
    (unavailable,) = of_kind(events, "ray_actor_unavailable")
    f = unavailable.fields
    assert (f["actor_id"], f["reason"], f["error"], f["rpc_code"]) == (actor_id, "rpc_error", "Socket closed", 14)
    assert unavailable.pid is None


@pytest.mark.parametrize("name", ["ray2.60-e-restartable-actor-oom", "ray2.49-e-restartable-actor-oom"])
def test_memory_monitor_kills_keep_their_exit_type(name):
    events = session(name)
    (unavailable,) = of_kind(events, "ray_actor_unavailable")
    assert (unavailable.fields["reason"], unavailable.fields["error"]) == ("restarted", "The actor was restarted")
    deaths = of_kind(events, "ray_worker_died")
    assert len(deaths) == 2  # gcs_server.out: one exit per killed worker
    assert {d.fields["exit_type"] for d in deaths} == {"NODE_OUT_OF_MEMORY"}
    assert all(len(d.fields["worker_id"]) == 56 for d in deaths)
    killed = {k["worker_id"]: k["pid"] for e in of_kind(events, "ray_oom_kill") for k in e.fields["killed"]}
    assert {d.pid for d in deaths} == {killed[d.fields["worker_id"]] for d in deaths}  # the pid the kill report gives the id


def test_owner_death_at_shutdown_is_no_event():
    (log,) = (SESSIONS / "ray2.60-c-actor-sigkill" / "logs").glob("python-core-worker-*_16773.log")
    assert of_kind(analyze(str(log)).events, "ray_worker_died") == []


def test_raylet_message_cut_in_its_exit_detail():
    (death,) = of_kind(real("034"), "ray_worker_died")
    assert (death.pid, death.node) == (1212159, "10.136.144.146")
    f = death.fields
    assert f["worker_id"] == "668d502f679d43e30ddd8d92ad043a22430f6d1edd8aa30f0b35886d"
    assert (f["exit_type"], f["error"], f["worker_port"]) == ("SYSTEM_ERROR", "connection error code 2", 11014)


def test_actor_fields_without_header_and_never_ran():
    (death,) = of_kind(real("036"), "ray_worker_died")
    assert (death.pid, death.actor) == (None, None)
    assert (death.fields["exit_type"], death.fields["never_ran"]) == ("SYSTEM_ERROR", True)


@pytest.mark.parametrize(
    "name,pid,actor,node,class_name",
    [
        ("037", 375881, "CriticModelRayActor", "0.0.0.0", "CriticModelRayActor"),
        ("039", 1504364, "WorkerDict", "172.24.67.40", "create_colocated_worker_cls.<locals>.WorkerDict"),
        ("040", 16424, "WorkerDict", "11.11.12.211", "create_colocated_worker_cls.<locals>.WorkerDict"),
        ("063", 87687, "WorkerDict", "10.29.214.5", "create_colocated_worker_cls.<locals>.WorkerDict"),
    ],
)
def test_actor_died_error(name, pid, actor, node, class_name):
    (death,) = of_kind(real(name), "ray_worker_died")
    assert (death.pid, death.actor, death.node) == (pid, actor, node)
    f = death.fields
    assert (f["class_name"], f["exit_type"], f["reason"], f["error"]) == (class_name, "SYSTEM_ERROR", "worker_died", "connection error code 2")
    assert len(f["actor_id"]) == 32


def test_driver_warning_logger_two_deaths():
    deaths = {e.pid: e for e in of_kind(real("072"), "ray_worker_died")}
    assert set(deaths) == {3379557, 3379502}
    assert deaths[3379557].time == "2023-06-07T15:26:09.573"
    assert deaths[3379557].fields["error"] == "connection error code 2"
    assert deaths[3379502].fields["error"] is None
    assert deaths[3379502].fields["exit_detail"].startswith("The leased worker has unrecoverable failure.")


def test_escless_colour_code_before_raylet():
    (death,) = of_kind(real("074"), "ray_worker_died")
    assert (death.pid, death.fields["worker_id"][:8]) == (1633485, "7e75be22")


def test_worker_crashed_error_names_the_remote_method():
    (death,) = of_kind(real("075"), "ray_worker_died")
    assert (death.actor, death.method, death.pid) == ("RemoteRewardModel", "get_rewards", None)
    f = death.fields
    assert (f["reason"], f["task_pid"], f["truncated"]) == ("worker_crashed", 1625610, True)


def test_actor_died_error_and_another_raylet_death_stay_apart():
    deaths = {e.pid: e for e in of_kind(real("081"), "ray_worker_died")}
    assert set(deaths) == {1009098, 1008813}
    assert deaths[1009098].actor == "WorkerDict"
    cut = deaths[1008813].fields
    assert (cut["exit_type"], cut["truncated"], cut["error"]) == ("SYSTEM_ERROR", True, None)


def test_actor_unavailable_inside_an_application_log_line():
    events = real("026")
    (event,) = of_kind(events, "ray_actor_unavailable")
    f = event.fields
    assert (f["actor_id"], f["error"], f["rpc_code"], f["reason"]) == (
        "c5d60362068042d8669d510501000000",
        "Cancelling all calls",
        14,
        "rpc_error",
    )
    assert of_kind(events, "watchdog_timeout") == []


@pytest.mark.parametrize("name", ["018", "054", "065", "073"])
def test_no_death(name):
    events = real(name)
    assert of_kind(events, "ray_worker_died") == [] and of_kind(events, "ray_actor_unavailable") == []


def test_generic_oom_killer_hint_is_no_oom():
    text = (
        "(raylet) A worker died or was killed while executing a task by an unexpected system error. To troubleshoot "
        "the problem, check the logs for the dead worker. RayTask ID: ffffffffffffffff39c80b07739f33d0e93c25a501000000 "
        "Worker ID: bbe3dad66021ea79a8010428d6b62182a10d9820ef2cb05eebbda3a4 Node ID: 11cc8329b7e3427cd1f8c1180517b9326fbab428cb30f7c1a44e4963 "
        "Worker IP address: 192.0.2.2 Worker port: 43057 Worker PID: 23010 Worker exit type: SYSTEM_ERROR Worker exit detail: "
        "Worker unexpectedly exits with a connection error code 2. End of file. There are some potential root causes. (1) The "
        "process is killed by SIGKILL by OOM killer due to high memory usage. (2) ray stop --force is called. (3) The worker is "
        "crashed unexpectedly due to SIGSEGV or other unexpected errors.\n"
        "ray.exceptions.NodeDiedError: Task failed because the node it was running on is dead or unavailable. Node IP: "
        "127.0.0.1, node ID: e55b8ca03ebf3f7418f51533d8d55abeaab75fa9b29e2e6282b47646. This can happen if the node was "
        "preempted, had a hardware failure, or its raylet crashed unexpectedly (e.g., due to OOM).\n"
    )
    events = parse_text(text)
    assert [(e.kind, e.pid, e.fields["reason"]) for e in events] == [
        ("ray_worker_died", 23010, "worker_died"),
        ("ray_worker_died", None, "node_died"),
    ]
    assert not {e.kind for e in events} & OOM_KINDS


def test_a_death_told_pid_first_then_worker_id_folds_once():
    actor_died = (
        "ray.exceptions.ActorDiedError: The actor died unexpectedly before finishing this task.\n"
        "\tclass_name: RewardModelRayActor\n\tactor_id: 3d9e4d90dd8007c038c824cd01000000\n\tpid: 4242\n"
        "The actor is dead because its worker process has died. Worker exit type: SYSTEM_ERROR Worker exit detail: "
        "Worker unexpectedly exits with a connection error code 2. End of file.\n"
    )
    raylet = (
        "(raylet) A worker died or was killed while executing a task by an unexpected system error. To troubleshoot the "
        "problem, check the logs for the dead worker. Lease ID: 01 Worker ID: aaaa Node ID: bbbb Worker IP address: "
        "10.0.0.9 Worker port: 1 Worker PID: 4242 Worker exit type: SYSTEM_ERROR Worker exit detail: Worker unexpectedly "
        "exits with a connection error code 2. End of file.\n"
    )
    gcs = (
        "[2026-01-01 00:00:01,000 W 1 1] (gcs_server) gcs_worker_manager.cc:70: Reporting worker exit, worker id = aaaa, "
        "node id = bbbb, address = 10.0.0.9, exit_type = SYSTEM_ERROR, exit_detail = Worker unexpectedly exits with a "
        "connection error code 2. End of file.\n"
    )
    (death,) = of_kind(parse_text(actor_died + raylet + gcs), "ray_worker_died")
    assert (death.pid, death.actor, death.fields["worker_id"]) == (4242, "RewardModelRayActor", "aaaa")
    assert len(death.sources) == 3


def test_a_death_told_before_the_report_that_names_its_exit_type_still_folds():
    """Ray 1.13: the driver's warning names the pid but no exit type, the GCS the worker id and
    the exit type, the caller's RayActorError the pid and exit type: one death, whatever order."""
    warning = (
        "2026-11-24 22:17:54,766\tWARNING worker.py:1404 -- A worker died or was killed while executing a task by an "
        "unexpected system error. To troubleshoot the problem, check the logs for the dead worker. RayTask ID: "
        "ffffffffffffffff6f2fc6da5db742f1b44290a901000000 Worker ID: 015b3c24911ac2198b8ee48274bd791744b74620f816cdc1dbd8b483 "
        "Node ID: ec50e77d61a42596364d2e8ba0b40177908f27af6f282cd6b362cf96 Worker IP address: 192.0.2.2 Worker port: 39101 Worker PID: 12554\n"
    )
    actor_error = (
        "ray.exceptions.RayActorError: The actor died unexpectedly before finishing this task.\n"
        "\tclass_name: CriticModelRayActor\n\tactor_id: 6f2fc6da5db742f1b44290a901000000\n\tpid: 12554\n"
        "The actor is dead because its worker process has died. Worker exit type: SYSTEM_ERROR_EXIT\n"
    )
    gcs = (
        "[2026-11-24 22:17:54,763 W 12316 12316] (gcs_server) gcs_worker_manager.cc:43: Reporting worker exit, worker id = "
        "015b3c24911ac2198b8ee48274bd791744b74620f816cdc1dbd8b483, node id = ec50e77d61a42596364d2e8ba0b40177908f27af6f282cd6b362cf96, "
        "address = 192.0.2.2, exit_type = SYSTEM_ERROR_EXIT0. Unintentional worker failures have been reported.\n"
    )
    (event,) = parse_text(warning + actor_error + gcs)
    assert (event.pid, event.fields["exit_type"], event.actor) == (12554, "SYSTEM_ERROR_EXIT", "CriticModelRayActor")


HEADER = (
    "ray.exceptions.RayTaskError(ActorDiedError): ray::TaskRunner.run() (pid=18948, ip=10.164.37.106, actor_id=2dbc, repr=<x>)\n"
    '  File "rl-factory/verl/trainer/ppo/ray_trainer.py", line 952, in fit\n'
    "    gen_batch_output = self.actor_rollout_wg.generate_sequences_loop(gen_batch)\n"
)
SECTION = (
    "ray.exceptions.ActorDiedError: The actor died unexpectedly before finishing this task.\n"
    "\tclass_name: create_colocated_worker_cls.<locals>.WorkerDict\n"
    "\tpid: 20174\n"
    "The actor is dead because its worker process has died. Worker exit type: SYSTEM_ERROR Worker exit detail: Worker unexpectedly exits with a connection error code 2. End of file.\n"
)


@pytest.mark.parametrize(
    "text,pid,sources",
    [
        (HEADER + SECTION, 20174, 2),  # the header is one more source of the death told below it
        (HEADER, None, 1),  # the header alone: an actor died, which one is not said
        (HEADER + "ray.exceptions.RayTaskError(ActorDiedEr", None, 2),  # and its name cut where a paste ended
    ],
)
def test_a_caller_header_wrapping_a_death(text, pid, sources, tmp_path):
    path = tmp_path / "paste.log"
    path.write_text(text)
    deaths = of_kind(analyze(str(path), jobs=1).events, "ray_worker_died")
    assert [(d.pid, len(d.sources)) for d in deaths] == [(pid, sources)]
    assert deaths[0].actor != "TaskRunner"  # the header's process is the caller, not the dead actor


RAYLET_DEATH = (
    "(raylet) A worker died or was killed while executing a task by an unexpected system error. To troubleshoot the problem, "
    "check the logs for the dead worker. RayTask ID: ffffffffffffffff39c80b07739f33d0e93c25a501000000 Worker ID: "
    "bbe3dad66021ea79a8010428d6b62182a10d9820ef2cb05eebbda3a4 Node ID: 11cc8329b7e3427cd1f8c1180517b9326fbab428cb30f7c1a44e4963 "
    "Worker IP address: 10.0.0.3 Worker port: 40021 Worker PID: 23010 Worker exit type: SYSTEM_ERROR Worker exit detail: "
    "Worker unexpectedly exits with a connection error code 2. End of file."
)
FIELDS = ["\tclass_name: LLMRayActor", "\tactor_id: 76f30a89bfab40aae642162902000000", "\tpid: 101850", "\tip: 10.0.0.3"]
CAUSE = "The actor is dead because its worker process has died. Worker exit type: SYSTEM_ERROR Worker exit detail: Worker unexpectedly exits with a connection error code 2. End of file."


@pytest.mark.parametrize("above", [FIELDS, FIELDS[1:], FIELDS[:1], ["\tname: rollout_0", "\tnamespace: default"]])
def test_an_actor_death_whose_first_line_was_cut_still_names_its_actor(above):
    """`ray job submit` keeps the last 20,000 characters of the logs: an ActorDiedError may
    begin at its fields. The cause reaches back over them (`//! back:`)."""
    text = "\n".join(
        ["Status message: Job entrypoint command failed with exit code 1, last available logs (truncated to 20,000 chars):", *above, CAUSE, "Done."]
    )
    (death,) = of_kind(parse_text(text), "ray_worker_died")
    told = dict(line.strip().split(": ", 1) for line in above)
    assert death.source.line == 2 and death.fields["exit_type"] == "SYSTEM_ERROR"
    assert (death.actor, death.pid) == (told.get("class_name"), int(told["pid"]) if "pid" in told else None)
    assert death.fields.get("name") == told.get("name") and death.fields.get("actor_id") == told.get("actor_id")


def test_lines_a_message_reaches_back_to_that_are_not_its_own_leave_it_read_from_its_line():
    """A worker death below an indented `name:` line of a config print: the death reaches back to
    it, cannot be read with it, and is read from its own line, not lost."""
    text = "\n".join(["trainer:", "    name: ppo", RAYLET_DEATH, "after"])
    (death,) = of_kind(parse_text(text), "ray_worker_died")
    assert (death.source.line, death.pid, death.fields["exit_type"]) == (3, 23010, "SYSTEM_ERROR")
