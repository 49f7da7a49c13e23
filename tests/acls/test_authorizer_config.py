"""The ACL authorizer is chosen by its short name and by Kafka's class names, reads Kafka's
settings, and leaves the other authorizers as they were (no store hook for them)."""

from __future__ import annotations

import pytest

from kafkapy.acls.authorizer import AclAuthorizer
from kafkapy.server.allowlist import AllowListAuthorizer
from kafkapy.server.auth import AllowAll, StoreBackedAuthorizer, load_authorizer
from kafkapy.server.config import ConfigError


@pytest.mark.parametrize("name", ["acl", "kafka.security.authorizer.AclAuthorizer",
                                  "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
                                  "kafkapy.acls.authorizer:AclAuthorizer"])
def test_kafkas_class_names_mean_the_acl_authorizer(name: str) -> None:
    authorizer = load_authorizer(name, {"super.users": "User:admin;User:ops",
                                        "allow.everyone.if.no.acl.found": "true"})
    assert isinstance(authorizer, AclAuthorizer) and isinstance(authorizer, StoreBackedAuthorizer)
    assert authorizer.super_users == {"User:admin", "User:ops"} and authorizer.allow_if_no_acl


def test_allow_everyone_defaults_to_false_and_must_be_a_boolean() -> None:
    assert not load_authorizer("acl", {}).allow_if_no_acl  # type: ignore[attr-defined]
    with pytest.raises(ConfigError, match=r"allow\.everyone\.if\.no\.acl\.found"):
        load_authorizer("acl", {"allow.everyone.if.no.acl.found": "maybe"})


def test_the_other_authorizers_are_not_store_backed() -> None:
    assert not isinstance(load_authorizer("", {}), StoreBackedAuthorizer)
    assert isinstance(load_authorizer("", {}), AllowAll)
    allowlist = load_authorizer("allowlist", {"allowlist.rules": "*@*:DESCRIBE"})
    assert isinstance(allowlist, AllowListAuthorizer) and not isinstance(allowlist, StoreBackedAuthorizer)
