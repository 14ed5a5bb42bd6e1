"""AlterUserScramCredentials: add, replace and delete users' SCRAM credentials. An upsertion
carries SaltedPassword (the client salted and hashed the password); the broker keeps only the
StoredKey and ServerKey derived from it. One result per user, with Kafka's errors."""

from __future__ import annotations

import asyncio
from collections import Counter

from bmq.broker.handlers.base import RequestContext
from bmq.broker.handlers.scram_credentials import NO_STORE, credential_store
from bmq.metadata.acls import Operation
from bmq.protocol.errors import ErrorCode
from bmq.protocol.messages import (
    AlterUserScramCredentialsRequest,
    AlterUserScramCredentialsResponse,
)
from bmq.protocol.messages.alter_user_scram_credentials_response import (
    AlterUserScramCredentialsResult,
)
from bmq.security.scram import (
    MAX_ITERATIONS,
    MECHANISM_BY_TYPE,
    MIN_ITERATIONS,
    credential_from_salted,
)


def _problem(name: str, mechanism: int, iterations: int | None) -> tuple[int, str] | None:
    if not name:
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, "Username must not be empty"
    if mechanism not in MECHANISM_BY_TYPE:
        return ErrorCode.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism"
    if iterations is not None and iterations < MIN_ITERATIONS:
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too few iterations"
    if iterations is not None and iterations > MAX_ITERATIONS:
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too many iterations"
    return None


async def handle_alter_user_scram_credentials(
        ctx: RequestContext, request: AlterUserScramCredentialsRequest,
        version: int) -> AlterUserScramCredentialsResponse:
    store = credential_store(ctx)
    users = [d.name for d in request.deletions] + [u.name for u in request.upsertions]
    if not ctx.authorize_cluster(Operation.ALTER):
        return AlterUserScramCredentialsResponse(results=[
            AlterUserScramCredentialsResult(
                user=name, error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED, error_message=None)
            for name in dict.fromkeys(users)])
    if store is None:
        return AlterUserScramCredentialsResponse(results=[
            AlterUserScramCredentialsResult(user=name, error_code=ErrorCode.UNSUPPORTED_VERSION,
                                            error_message=NO_STORE)
            for name in dict.fromkeys(users)])
    pairs = Counter([(d.name, d.mechanism) for d in request.deletions]
                    + [(u.name, u.mechanism) for u in request.upsertions])
    errors: dict[str, tuple[int, str]] = {}
    for (name, _), count in pairs.items():
        if count > 1:
            errors.setdefault(name, (ErrorCode.DUPLICATE_RESOURCE,
                                     "A user credential cannot be altered twice in the same "
                                     "request"))
    for d in request.deletions:
        problem = _problem(d.name, d.mechanism, None)
        if problem is None and store.get(d.name, MECHANISM_BY_TYPE[d.mechanism]) is None:
            problem = (ErrorCode.RESOURCE_NOT_FOUND,
                       "Attempt to delete a user credential that does not exist")
        if problem is not None:
            errors.setdefault(d.name, problem)
    for u in request.upsertions:
        problem = _problem(u.name, u.mechanism, u.iterations)
        if problem is not None:
            errors.setdefault(u.name, problem)
    # Kafka applies a user's changes only if all of them are acceptable.
    deletions = [(d.name, MECHANISM_BY_TYPE[d.mechanism]) for d in request.deletions
                 if d.name not in errors]
    upsertions = [(u.name, credential_from_salted(MECHANISM_BY_TYPE[u.mechanism], bytes(u.salt),
                                                  bytes(u.salted_password), u.iterations))
                  for u in request.upsertions if u.name not in errors]
    if deletions or upsertions:
        await asyncio.get_running_loop().run_in_executor(None, store.alter, deletions,
                                                         upsertions)
    return AlterUserScramCredentialsResponse(results=[
        AlterUserScramCredentialsResult(user=name, error_code=errors.get(name, (0, ""))[0],
                                        error_message=errors[name][1] if name in errors else None)
        for name in dict.fromkeys(users)])
