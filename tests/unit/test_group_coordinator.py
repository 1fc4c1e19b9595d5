"""The classic group coordinator's rules (Kafka's `GroupMetadataManager` classic half), without Kafka:
joins and generations, KIP-394's MEMBER_ID_REQUIRED, KIP-345's static members, protocol selection,
sync, heartbeats, leaving, session expiry, offset commits and what lasts in the store, deletion and
loading after a restart. Timers are the loop's: expiry tests use short sessions and wait on the
coordinator's answers, never on durations."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from kio.schema.errors import ErrorCode

from contract.group_records import OffsetAndMetadata
from front_door.cluster.leadership import node_ids
from front_door.groups.classic_group import ClassicGroup, GroupState, Member, Protocol
from front_door.groups.coordinator import GroupCoordinator
from front_door.groups.coordinator_api import GroupSettings, JoinRequest, JoinResult, LeavingMember
from front_door.groups.placement import coordinator, java_string_hash, partition_for
from tests.memory_group_store import MemoryGroupStore

T = TypeVar("T")
RANGE = (Protocol("range", b"sub-a"),)
JAVA_HASH_OF_NON_ASCII = 16752006  # "é€😀".hashCode() on Java 17
# no initial delay: a lone first member gets its generation at once (the delay has its own test)
FAST = GroupSettings(min_session_timeout_ms=1, initial_rebalance_delay_ms=0)
SESSION_MS = 10_000


def run(test: Callable[[GroupCoordinator, MemoryGroupStore], Awaitable[T]], settings: GroupSettings = FAST) -> T:
    async def main() -> T:
        store = MemoryGroupStore()
        groups = GroupCoordinator(store, settings)
        try:
            return await test(groups, store)
        finally:
            groups.close()

    return asyncio.run(main())


def join_request(group: str = "g", member_id: str = "", protocols: tuple[Protocol, ...] = RANGE,
                 instance: str | None = None, session_ms: int = SESSION_MS, rebalance_ms: int = SESSION_MS,
                 protocol_type: str = "consumer", known: bool = True) -> JoinRequest:
    return JoinRequest(group, member_id, instance, session_ms, rebalance_ms, protocol_type, protocols, "client",
                       "/127.0.0.1", known)


async def joined(groups: GroupCoordinator, **kwargs: Any) -> JoinResult:
    """A member's first join: the id first (KIP-394), then the join with it."""
    first = await groups.join(join_request(**kwargs))
    if first.error != ErrorCode.member_id_required:
        return first
    return await groups.join(join_request(**{**kwargs, "member_id": first.member_id}))


async def stable_member(groups: GroupCoordinator, **kwargs: Any) -> JoinResult:
    """A member that joined and synced an empty assignment: the group is Stable with it alone."""
    result = await joined(groups, **kwargs)
    assert (await groups.sync(kwargs.get("group", "g"), result.generation, result.member_id, None, None, None, {})).error == ErrorCode.none
    return result


async def settle(*waiting: Awaitable[T]) -> list[T]:
    return list(await asyncio.gather(*waiting))


def test_a_lone_member_joins_syncs_and_is_stable() -> None:
    async def test(groups: GroupCoordinator, store: MemoryGroupStore) -> None:
        first = await groups.join(join_request())
        assert first.error == ErrorCode.member_id_required and first.member_id.startswith("client-")
        assert groups.groups["g"].members == {}  # not a member until it joins with the id
        result = await groups.join(join_request(member_id=first.member_id))
        assert (result.error, result.generation, result.leader, result.protocol_name) == \
               (ErrorCode.none, 1, first.member_id, "range")
        assert [m.metadata for m in result.members] == [b"sub-a"]  # the leader learns the subscriptions
        synced = await groups.sync("g", 1, first.member_id, None, "consumer", "range", {first.member_id: b"p0"})
        assert (synced.error, synced.assignment) == (ErrorCode.none, b"p0")
        assert groups.groups["g"].state == GroupState.STABLE
        assert store.groups["g"].members[0].assignment == b"p0"  # stored before the answer
        assert groups.heartbeat("g", 1, first.member_id, None) == ErrorCode.none

    run(test)


def test_before_v4_a_member_joins_without_asking_for_an_id() -> None:
    async def test(groups: GroupCoordinator, _store: MemoryGroupStore) -> None:
        result = await groups.join(join_request(known=False))
        assert result.error == ErrorCode.none and result.member_id

    run(test)


def test_a_second_member_rebalances_the_group_and_the_follower_waits_for_the_leaders_sync() -> None:
    async def test(groups: GroupCoordinator, _store: MemoryGroupStore) -> None:
        a = await joined(groups)
        await groups.sync("g", 1, a.member_id, None, None, None, {a.member_id: b"all"})
        b_id = (await groups.join(join_request())).member_id
        b_join = asyncio.ensure_future(groups.join(join_request(member_id=b_id)))
        await asyncio.sleep(0)
        assert groups.groups["g"].state == GroupState.PREPARING_REBALANCE
        assert groups.heartbeat("g", 1, a.member_id, None) == ErrorCode.rebalance_in_progress
        # a commit of the old generation still counts while the group prepares (eager rebalance revokes)
        assert (await groups.commit("g", 1, a.member_id, None, {("t", 0): offset(5)})) == {("t", 0): ErrorCode.none}
        a_join, b_result = await settle(groups.join(join_request(member_id=a.member_id)), b_join)
        assert a_join.generation == b_result.generation == 2
        assert a_join.leader == b_result.leader == a.member_id  # the leader stays the leader
        assert {m.member_id for m in a_join.members} == {a.member_id, b_id} and b_result.members == ()
        follower = asyncio.ensure_future(groups.sync("g", 2, b_id, None, None, None, {}))
        await asyncio.sleep(0)
        assert not follower.done()
        assert (await groups.commit("g", 2, a.member_id, None, {("t", 0): offset(6)})) == \
               {("t", 0): ErrorCode.rebalance_in_progress}  # CompletingRebalance takes no commits
        leader = await groups.sync("g", 2, a.member_id, None, None, None, {a.member_id: b"p0", b_id: b"p1"})
        assert (leader.assignment, (await follower).assignment) == (b"p0", b"p1")

    run(test)


def test_member_errors_are_kafkas() -> None:
    async def test(groups: GroupCoordinator, _store: MemoryGroupStore) -> None:
        a = await joined(groups)
        assert groups.heartbeat("g", 1, "nobody", None) == ErrorCode.unknown_member_id
        assert groups.heartbeat("g", 7, a.member_id, None) == ErrorCode.illegal_generation
        assert groups.heartbeat("other", 1, a.member_id, None) == ErrorCode.unknown_member_id
        assert (await groups.sync("g", 0, a.member_id, None, None, None, {})).error == ErrorCode.illegal_generation
        assert (await groups.sync("g", 1, a.member_id, None, "connect", None, {})).error == \
               ErrorCode.inconsistent_group_protocol
        assert (await groups.join(join_request(protocol_type="connect"))).error == ErrorCode.inconsistent_group_protocol
        assert (await groups.join(join_request(protocols=(Protocol("sticky", b""),)))).error == \
               ErrorCode.inconsistent_group_protocol
        assert (await groups.join(join_request(group=""))).error == ErrorCode.invalid_group_id
        assert (await groups.join(join_request(member_id="gone"))).error == ErrorCode.unknown_member_id
        assert (await groups.join(join_request(group="new", member_id="gone"))).error == ErrorCode.unknown_member_id

    run(test)
    too_short = GroupSettings(initial_rebalance_delay_ms=0)  # Kafka's group.min.session.timeout.ms, 6 s
    assert run(lambda g, _s: g.join(join_request(session_ms=5_999)), too_short).error == ErrorCode.invalid_session_timeout


def test_the_protocol_most_members_vote_for_is_selected() -> None:
    group = ClassicGroup("g")
    for member_id, names in (("a", ("sticky", "range")), ("b", ("range", "sticky")), ("c", ("range", "roundrobin", "sticky"))):
        group.add(Member(member_id, None, "c", "h", 1, 1, "consumer", tuple(Protocol(n, b"") for n in names)))
    assert group.candidate_protocols() == {"sticky", "range"}
    assert group.select_protocol() == "range"  # b and c vote range, a votes sticky


def test_a_static_member_back_under_a_new_id_takes_its_place_without_a_rebalance() -> None:
    async def test(groups: GroupCoordinator, store: MemoryGroupStore) -> None:
        a = await groups.join(join_request(instance="i-a"))  # static members join without MEMBER_ID_REQUIRED
        assert a.error == ErrorCode.none and a.member_id.startswith("i-a-")
        await groups.sync("g", 1, a.member_id, "i-a", None, None, {a.member_id: b"p0"})
        again = await groups.join(join_request(instance="i-a"))
        assert again.error == ErrorCode.none and again.member_id != a.member_id
        assert again.generation == 1 and again.skip_assignment  # the leader keeps the assignment (KIP-814)
        assert groups.groups["g"].state == GroupState.STABLE
        assert (await groups.sync("g", 1, again.member_id, "i-a", None, None, {})).assignment == b"p0"
        assert groups.heartbeat("g", 1, a.member_id, "i-a") == ErrorCode.fenced_instance_id
        assert store.groups["g"].members[0].member_id == again.member_id
        left = groups.leave("g", [LeavingMember("", "i-a")])  # by instance id alone (the admin client's way)
        assert left == (ErrorCode.none, [(LeavingMember("", "i-a"), ErrorCode.none)])
        assert groups.groups["g"].members == {}

    run(test)


def test_a_static_member_back_with_new_metadata_keeps_its_place_and_a_new_protocol_rebalances() -> None:
    """Kafka rebalances a Stable group on a static rejoin only when the selected protocol would change; the
    metadata is the rejoining member's (a restarted sticky assignor sends no previous assignment)."""
    async def test(groups: GroupCoordinator, _store: MemoryGroupStore) -> None:
        a = await groups.join(join_request(instance="i-a"))
        await groups.sync("g", 1, a.member_id, "i-a", None, None, {a.member_id: b"p0"})
        again = await groups.join(join_request(instance="i-a", protocols=(Protocol("range", b"restarted"),)))
        assert (again.error, again.generation, groups.groups["g"].state) == (ErrorCode.none, 1, GroupState.STABLE)
        assert groups.groups["g"].members[again.member_id].protocols == (Protocol("range", b"restarted"),)
        assert (await groups.sync("g", 1, again.member_id, "i-a", None, None, {})).assignment == b"p0"

        # sticky first, then range: the group (this member alone) would now select sticky, a new generation
        first_sticky = (Protocol("sticky", b""), Protocol("range", b""))
        other = await asyncio.wait_for(groups.join(join_request(instance="i-a", protocols=first_sticky)), 10)
        assert (other.error, other.generation, groups.groups["g"].protocol) == (ErrorCode.none, 2, "sticky")

    run(test)


def test_a_member_that_leaves_rebalances_the_others() -> None:
    async def test(groups: GroupCoordinator, _store: MemoryGroupStore) -> None:
        a = await stable_member(groups)
        b_id = (await groups.join(join_request())).member_id
        a_again, b = await settle(groups.join(join_request(member_id=a.member_id)),
                                  groups.join(join_request(member_id=b_id)))
        await settle(groups.sync("g", 2, a.member_id, None, None, None, {}), groups.sync("g", 2, b_id, None, None, None, {}))
        error, results = groups.leave("g", [LeavingMember(b_id, None), LeavingMember("stranger", None)])
        assert error == ErrorCode.none
        assert [code for _, code in results] == [ErrorCode.none, ErrorCode.unknown_member_id]
        assert groups.heartbeat("g", 2, a.member_id, None) == ErrorCode.rebalance_in_progress
        alone = await groups.join(join_request(member_id=a.member_id))
        assert (alone.generation, [m.member_id for m in alone.members]) == (3, [a.member_id])
        assert a_again.generation == b.generation == 2

    run(test)


def test_a_member_whose_session_runs_out_is_removed_and_the_group_rebalances() -> None:
    async def test(groups: GroupCoordinator, _store: MemoryGroupStore) -> None:
        a = await stable_member(groups)  # a long session, kept by its rejoin below
        b_id = (await groups.join(join_request(session_ms=50, rebalance_ms=SESSION_MS))).member_id
        await settle(groups.join(join_request(member_id=a.member_id)),
                     groups.join(join_request(member_id=b_id, session_ms=50, rebalance_ms=SESSION_MS)))
        await settle(groups.sync("g", 2, a.member_id, None, None, None, {}), groups.sync("g", 2, b_id, None, None, None, {}))
        # b never heartbeats again: its session ends, a is told to rejoin and gets a generation alone
        while groups.heartbeat("g", 2, a.member_id, None) == ErrorCode.none:
            await asyncio.sleep(0.01)
        alone = await groups.join(join_request(member_id=a.member_id))
        assert (alone.generation, [m.member_id for m in alone.members]) == (3, [a.member_id])

    run(test)


def test_the_initial_delay_gathers_members_starting_together_into_one_generation() -> None:
    async def test(groups: GroupCoordinator, _store: MemoryGroupStore) -> None:
        ids = [(await groups.join(join_request())).member_id for _ in range(3)]
        results = await settle(*(groups.join(join_request(member_id=m)) for m in ids))
        assert {r.generation for r in results} == {1}
        assert len(next(r for r in results if r.members).members) == 3

    run(test, GroupSettings(min_session_timeout_ms=1, initial_rebalance_delay_ms=50))


def test_commits_follow_kafkas_rules_and_last_in_the_store() -> None:
    async def test(groups: GroupCoordinator, store: MemoryGroupStore) -> None:
        # generation -1 without a member: a consumer outside group management, into a new (empty) group
        assert await groups.commit("solo", -1, "", None, {("t", 0): offset(3, "m")}) == {("t", 0): ErrorCode.none}
        assert groups.groups["solo"].state == GroupState.EMPTY
        assert groups.fetch_offsets("solo", [("t", 0), ("t", 1)])[("t", 0)].metadata == "m"
        assert groups.fetch_offsets("solo", [("t", 1)])[("t", 1)].offset == -1
        assert await groups.commit("gone", 4, "m", None, {("t", 0): offset(1)}) == {("t", 0): ErrorCode.illegal_generation}
        a = await joined(groups)
        assert await groups.commit("g", -1, "", None, {("t", 0): offset(1)}) == {("t", 0): ErrorCode.unknown_member_id}
        assert await groups.commit("g", 0, a.member_id, None, {("t", 0): offset(1)}) == {("t", 0): ErrorCode.illegal_generation}
        big = offset(1, "x" * 4097)  # offset.metadata.max.bytes
        assert await groups.commit("g", 1, a.member_id, None, {("t", 0): big}) == \
               {("t", 0): ErrorCode.rebalance_in_progress}  # not yet synced
        await groups.sync("g", 1, a.member_id, None, None, None, {})
        assert await groups.commit("g", 1, a.member_id, None, {("t", 0): big, ("t", 1): offset(9)}) == \
               {("t", 0): ErrorCode.offset_metadata_too_large, ("t", 1): ErrorCode.none}
        assert store.offsets["g"] == {("t", 1): offset(9)}
        store.fail = True
        assert await groups.commit("g", 1, a.member_id, None, {("t", 1): offset(10)}) == \
               {("t", 1): ErrorCode.coordinator_not_available}
        assert groups.fetch_offsets("g", None)[("t", 1)].offset == 9  # what was not stored is not served

    run(test)


def test_only_an_empty_group_is_deleted_and_its_offsets_go_with_it() -> None:
    async def test(groups: GroupCoordinator, store: MemoryGroupStore) -> None:
        a = await joined(groups)
        assert await groups.delete("g") == ErrorCode.non_empty_group
        assert await groups.delete("nope") == ErrorCode.group_id_not_found
        await groups.commit("solo", -1, "", None, {("t", 0): offset(3)})
        assert await groups.delete("solo") == ErrorCode.none
        assert "solo" not in groups.groups and groups.fetch_offsets("solo", None) == {}
        assert store.load().offsets.get("solo") is None
        assert [g.group_id for g in groups.list_groups()] == ["g"]
        assert groups.list_groups(["stable"]) == [] and len(groups.list_groups(["CompletingRebalance"])) == 1
        assert a.error == ErrorCode.none

    run(test)


def test_a_restarted_coordinator_serves_what_the_store_kept() -> None:
    async def first(groups: GroupCoordinator, store: MemoryGroupStore) -> Any:
        a = await joined(groups)
        await groups.sync("g", 1, a.member_id, None, None, None, {a.member_id: b"p0"})
        await groups.commit("g", 1, a.member_id, None, {("t", 0): offset(42, "meta")})
        return a.member_id, store.load()

    member_id, stored = run(first)

    async def second(groups: GroupCoordinator, _store: MemoryGroupStore) -> None:
        groups.load(stored)
        assert groups.groups["g"].state == GroupState.STABLE
        assert groups.heartbeat("g", 1, member_id, None) == ErrorCode.none  # the member keeps its generation
        assert (await groups.sync("g", 1, member_id, None, None, None, {})).assignment == b"p0"
        assert groups.fetch_offsets("g", None)[("t", 0)] .offset == 42
        d = groups.describe("g")
        assert d is not None and d.protocol == "range" and d.members[0].metadata == b"sub-a"

    run(second)


def test_a_failed_assignment_write_sends_everyone_back_to_rejoin() -> None:
    async def test(groups: GroupCoordinator, store: MemoryGroupStore) -> None:
        a = await joined(groups)
        store.fail = True
        assert (await groups.sync("g", 1, a.member_id, None, None, None, {a.member_id: b"x"})).error == \
               ErrorCode.coordinator_not_available
        assert groups.groups["g"].state == GroupState.PREPARING_REBALANCE

    run(test)


def test_the_coordinator_of_a_group_is_kafkas_partition_for_it_on_every_node() -> None:
    # Java's own answers (jshell): "group".hashCode(), "".hashCode(), "é€😀".hashCode() (UTF-16 code units)
    assert java_string_hash("group") == 98629247
    assert java_string_hash("") == 0
    assert java_string_hash("é€😀") == JAVA_HASH_OF_NON_ASCII
    assert partition_for("group") == 98629247 % 50
    assert {coordinator("orders-app", node_ids(4)) for _ in range(3)} == {coordinator("orders-app", node_ids(4))}
    assert {coordinator(f"g{i}", node_ids(4)) for i in range(200)} == {1, 2, 3, 4}  # groups spread over the nodes


def offset(n: int, metadata: str = "") -> OffsetAndMetadata:
    return OffsetAndMetadata(n, -1, metadata, 0)



def test_offsets_of_an_empty_group_expire_after_the_retention_and_the_group_goes() -> None:
    clock = [1_000_000]
    settings = GroupSettings(min_session_timeout_ms=1, initial_rebalance_delay_ms=0, offsets_retention_ms=1_000)

    async def main() -> None:
        store = MemoryGroupStore()
        groups = GroupCoordinator(store, settings, now_ms=lambda: clock[0])
        try:
            # a standalone consumer's group: each offset expires a retention after its own commit
            await groups.commit("solo", -1, "", None, {("t", 0): OffsetAndMetadata(1, -1, "", clock[0])})
            clock[0] += 600
            await groups.commit("solo", -1, "", None, {("t", 1): OffsetAndMetadata(2, -1, "", clock[0])})
            # a managed group: its offsets expire a retention after it became empty, not after the commit
            a = await stable_member(groups)
            await groups.commit("g", 1, a.member_id, None, {("t", 0): offset(5)})
            active = await stable_member(groups, group="busy")
            clock[0] += 500
            groups.leave("g", [LeavingMember(a.member_id, None)])
            assert groups.groups["g"].state == GroupState.EMPTY
            await groups.expire_offsets()
            assert list(groups.fetch_offsets("solo", None)) == [("t", 1)]  # the first commit is 1 100 ms old
            assert "g" in groups.groups  # empty for 0 ms
            clock[0] += 1_000
            await groups.expire_offsets()
            assert "solo" not in groups.groups and "g" not in groups.groups
            assert "solo" not in store.load().offsets and "g" not in store.load().groups
            assert "busy" in groups.groups and active.error == ErrorCode.none  # a group with members stays
        finally:
            groups.close()

    asyncio.run(main())


def test_a_group_handed_over_to_another_door_is_unloaded_and_its_waiting_members_told_to_look_again() -> None:
    """`unload` (`door_membership.py`): the door losing a group stops its timers, answers the members waiting
    in a join NOT_COORDINATOR and forgets it; the door gaining it loads only the groups it coordinates."""
    async def test(groups: GroupCoordinator, store: MemoryGroupStore) -> None:
        a = await joined(groups)
        await groups.sync("g", 1, a.member_id, None, None, None, {a.member_id: b"p0"})
        await groups.commit("g", 1, a.member_id, None, {("t", 0): offset(7)})
        await stable_member(groups, group="other")
        b_id = (await groups.join(join_request())).member_id
        waiting = asyncio.ensure_future(groups.join(join_request(member_id=b_id)))  # a rebalance under way
        await asyncio.sleep(0)
        groups.unload(lambda g: g == "g")
        assert (await waiting).error == ErrorCode.not_coordinator
        assert "g" not in groups.groups and groups.fetch_offsets("g", None) == {}
        assert "other" in groups.groups  # a group this door keeps is untouched
        taker = GroupCoordinator(store, FAST)
        try:
            taker.load(store.load(), only=lambda g: g == "g")
            assert set(taker.groups) == {"g"}
            assert taker.fetch_offsets("g", None)[("t", 0)].offset == 7
            # the group as last stored: generation 1 with its member (the rebalance under way was not)
            assert taker.heartbeat("g", 1, a.member_id, None) == ErrorCode.none
        finally:
            taker.close()

    run(test)
