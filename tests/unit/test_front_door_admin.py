"""The front door's admin answers through Kafka's wire format (kio): DescribeConfigs with Kafka's config
sources and synonyms, DescribeCluster, OffsetForLeaderEpoch, the leader-epoch checks of Fetch and
ListOffsets (KIP-320), the refusals of CreateTopics / DeleteTopics / CreatePartitions naming the registry
file, and an ApiVersions error answer listing only ApiVersions (KIP-511)."""

from __future__ import annotations

import datetime
import sys
from pathlib import Path
from types import ModuleType

import pytest
from kio.index import load_request_schema
from kio.schema.errors import ErrorCode

from front_door.api_keys import ApiKey
from front_door.apis import (
    create_partitions,
    create_topics,
    delete_topics,
    describe_cluster,
    describe_configs,
    list_offsets,
    offset_for_leader_epoch,
)
from front_door.apis.api_versions import ADVERTISED, api_versions_body
from front_door.apis.describe_configs import ConfigSource
from front_door.cluster.leader_epoch import epoch_error
from front_door.cluster.leadership import leader, node_ids
from front_door.context import Context
from tests.unit.test_front_door import REGISTRY, _answer, _context
from validators.append_result import GATEWAY_LEADER_EPOCH
from validators.topic_config import TopicRegistry

WINDOWED = TopicRegistry.from_json({
    "defaults": {"log.message.timestamp.after.max.ms": "60000"},
    "topics": {"orders": {"partitions": 3, "configs": {"message.timestamp.type": "LogAppendTime"}}}})


def req(api_key: int, version: int) -> ModuleType:
    return sys.modules[load_request_schema(api_key, version).__module__]


def _ctx(tmp_path: Path, registry: TopicRegistry = REGISTRY) -> Context:
    ctx = _context(tmp_path)
    ctx.registry = lambda: registry
    ctx.registry_file = "/etc/gateway/topics.json"
    return ctx


def test_describe_configs_gives_kafkas_sources_and_synonyms(tmp_path: Path) -> None:
    m = req(32, 4)
    answer = _answer(_ctx(tmp_path, WINDOWED), describe_configs.handle, 32, 4, m.DescribeConfigsRequest(
        resources=(m.DescribeConfigsResource(resource_type=2, resource_name="orders", configuration_keys=None),
                   m.DescribeConfigsResource(resource_type=2, resource_name="nope", configuration_keys=None),
                   m.DescribeConfigsResource(resource_type=2, resource_name="orders",
                                             configuration_keys=("retention.ms",))),
        include_synonyms=True, include_documentation=False))
    orders, nope, one = answer.results
    configs = {c.name: c for c in orders.configs}
    own = configs["message.timestamp.type"]
    assert (own.value, own.config_source, own.read_only) == ("LogAppendTime", ConfigSource.TOPIC_CONFIG, False)
    assert [(s.name, s.value, s.source) for s in own.synonyms] == [
        ("message.timestamp.type", "LogAppendTime", ConfigSource.TOPIC_CONFIG),
        ("log.message.timestamp.type", "CreateTime", ConfigSource.DEFAULT_CONFIG)]
    after = configs["message.timestamp.after.max.ms"]
    assert (after.value, after.config_source) == ("60000", ConfigSource.STATIC_BROKER_CONFIG)
    retention = configs["retention.ms"]
    assert (retention.value, retention.config_source, retention.config_type) == ("604800000", ConfigSource.DEFAULT_CONFIG, 5)
    assert configs["cleanup.policy"].value == "delete" and configs["cleanup.policy"].config_type == 7
    assert nope.error_code == ErrorCode.unknown_topic_or_partition
    assert [c.name for c in one.configs] == ["retention.ms"]


def test_describe_configs_of_brokers(tmp_path: Path) -> None:
    m = req(32, 1)
    answer = _answer(_ctx(tmp_path, WINDOWED), describe_configs.handle, 32, 1, m.DescribeConfigsRequest(
        resources=(m.DescribeConfigsResource(resource_type=4, resource_name="2", configuration_keys=None),
                   m.DescribeConfigsResource(resource_type=4, resource_name="", configuration_keys=None),
                   m.DescribeConfigsResource(resource_type=4, resource_name="3", configuration_keys=None),
                   m.DescribeConfigsResource(resource_type=8, resource_name="2", configuration_keys=None)),
        include_synonyms=False), node_id=2)
    own, cluster, other, logger = answer.results
    assert own.error_code == cluster.error_code == ErrorCode.none
    values = {c.name: c.value for c in own.configs}
    assert values["log.message.timestamp.after.max.ms"] == "60000"
    assert values["socket.request.max.bytes"] == str(104857600)
    assert (other.error_code, logger.error_code) == (ErrorCode.invalid_request, ErrorCode.invalid_request)


def test_describe_cluster_names_every_node(tmp_path: Path) -> None:
    answer = _answer(_ctx(tmp_path), describe_cluster.handle, 60, 2, req(60, 2).DescribeClusterRequest(
        include_cluster_authorized_operations=False, endpoint_type=1, include_fenced_brokers=False))
    assert answer.error_code == ErrorCode.none and answer.cluster_id == "ingest-gateway"
    assert [(b.broker_id, b.port, b.is_fenced) for b in answer.brokers] == [(n, 9092 + n, False) for n in range(1, 5)]
    controllers = _answer(_ctx(tmp_path), describe_cluster.handle, 60, 1, req(60, 1).DescribeClusterRequest(
        include_cluster_authorized_operations=False, endpoint_type=2))
    assert controllers.error_code == ErrorCode.unsupported_endpoint_type


def test_offset_for_leader_epoch(tmp_path: Path) -> None:
    m = req(23, 4)
    home = leader("orders", 0, node_ids(4))
    away = next(p for p in range(3) if leader("orders", p, node_ids(4)) != home)

    def ask(partition: int, epoch: int, current: int = -1, node: int = home) -> tuple[int, int, int]:
        answer = _answer(_ctx(tmp_path), offset_for_leader_epoch.handle, 23, 4, m.OffsetForLeaderEpochRequest(
            replica_id=-1, topics=(m.OffsetForLeaderTopic(topic="orders", partitions=(m.OffsetForLeaderPartition(
                partition=partition, current_leader_epoch=current, leader_epoch=epoch),)),)), node_id=node)
        p = answer.topics[0].partitions[0]
        return p.error_code, p.leader_epoch, p.end_offset

    assert ask(0, GATEWAY_LEADER_EPOCH) == (ErrorCode.none, -1, -1)  # nothing appended: no epoch started
    assert ask(0, 5) == (ErrorCode.none, -1, -1)
    assert ask(0, 0, current=1)[0] == ErrorCode.unknown_leader_epoch
    assert ask(away, 0, node=home)[0] == ErrorCode.not_leader_or_follower
    assert ask(7, 0)[0] == ErrorCode.unknown_topic_or_partition


def test_current_leader_epochs_are_checked_as_kafka_checks_them(tmp_path: Path) -> None:
    assert epoch_error(-1) is None and epoch_error(GATEWAY_LEADER_EPOCH) is None
    assert epoch_error(GATEWAY_LEADER_EPOCH + 1) == ErrorCode.unknown_leader_epoch
    assert epoch_error(-2) == ErrorCode.fenced_leader_epoch
    m = req(2, 10)
    home = leader("orders", 1, node_ids(4))
    answer = _answer(_ctx(tmp_path), list_offsets.handle, 2, 10, m.ListOffsetsRequest(
        replica_id=-1, isolation_level=0, timeout=datetime.timedelta(seconds=1), topics=(m.ListOffsetsTopic(
            name="orders", partitions=(m.ListOffsetsPartition(partition_index=1, current_leader_epoch=3, timestamp=-1),)),)),
        node_id=home)
    assert answer.topics[0].partitions[0].error_code == ErrorCode.unknown_leader_epoch


@pytest.mark.parametrize("api", ["create", "delete", "partitions"])
def test_topic_admin_is_refused_naming_the_registry_file(tmp_path: Path, api: str) -> None:
    ctx = _ctx(tmp_path)
    if api == "create":
        m = req(19, 7)
        answer = _answer(ctx, create_topics.create_topics, 19, 7, m.CreateTopicsRequest(topics=(m.CreatableTopic(
            name="new", num_partitions=1, replication_factor=1, assignments=(), configs=()),),
            timeout=datetime.timedelta(seconds=5), validate_only=True))
        results = [(t.error_code, t.error_message) for t in answer.topics]
        assert results[0][0] == ErrorCode.policy_violation
    elif api == "delete":
        m = req(20, 6)
        answer = _answer(ctx, delete_topics.delete_topics, 20, 6, m.DeleteTopicsRequest(
            topics=(m.DeleteTopicState(name="orders", topic_id=None),), timeout=datetime.timedelta(seconds=5)))
        results = [(r.error_code, r.error_message) for r in answer.responses]
        assert results[0][0] == ErrorCode.topic_deletion_disabled
        old = _answer(ctx, delete_topics.delete_topics, 20, 1, req(20, 1).DeleteTopicsRequest(
            topic_names=("orders",), timeout=datetime.timedelta(seconds=5)))
        assert old.responses[0].error_code == ErrorCode.topic_deletion_disabled
    else:
        m = req(37, 3)
        answer = _answer(ctx, create_partitions.create_partitions, 37, 3, m.CreatePartitionsRequest(topics=(
            m.CreatePartitionsTopic(name="orders", count=9, assignments=None),), timeout=datetime.timedelta(seconds=5),
            validate_only=False))
        results = [(r.error_code, r.error_message) for r in answer.results]
        assert results[0][0] == ErrorCode.policy_violation
    assert "/etc/gateway/topics.json" in results[0][1]


def test_an_unsupported_api_versions_version_is_answered_with_only_api_versions() -> None:
    body = api_versions_body(0, ErrorCode.unsupported_version)
    assert [(k.api_key, k.min_version, k.max_version) for k in body.api_keys] == [
        (ApiKey.API_VERSIONS, *ADVERTISED[ApiKey.API_VERSIONS])]
