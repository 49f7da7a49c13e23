"""ACLs: Kafka's ACL authorizer (``authorizer.class.name=acl``) and DescribeAcls, CreateAcls and
DeleteAcls, with the ACLs kept in the metadata store at Kafka's ZooKeeper paths.

See docs/acls.md. ``AclsModule`` is a built-in module, enabled by default; it answers
SECURITY_DISABLED until the ACL authorizer is configured.
"""

from kafkapy.acls.authorizer import AclAuthorizer
from kafkapy.acls.module import AclsModule

__all__ = ["AclAuthorizer", "AclsModule"]
