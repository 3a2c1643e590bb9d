"""How the object store's S3 faults become source errors, and no credential in any log line.

:func:`translated` turns boto3 / network faults into ``RetriableSourceError`` (throttling, 5xx,
dropped connections, timeouts: after botocore's own ``MAX_RETRIES`` retries), ``FatalSourceError``
(access denied, naming the bucket, the prefix and the permission needed; rejected or missing
credentials) or ``InputError`` (a missing bucket, the wrong region); what a fault quotes is
redacted (``schemas.secrets.redact``: access key ids, signatures, session tokens, secrets).
:func:`guard_logs` puts the redacting filter on the botocore / boto3 / s3transfer / urllib3
loggers and the object store's own (botocore logs signed headers at DEBUG).
"""
from __future__ import annotations

import logging
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Iterator

from connectors.errors import FatalSourceError, InputError, RetriableSourceError, SourceError
from schemas.secrets import REDACTING, redact

# The logger every object store module writes to.
LOG_NAME = "connectors.objectstore"
MAX_RETRIES = 4             # botocore retries per request after the first try (standard mode)
THROTTLING = {"SlowDown", "Throttling", "ThrottlingException", "ThrottledException",
              "RequestThrottled", "RequestThrottledException", "TooManyRequestsException",
              "RequestLimitExceeded", "BandwidthLimitExceeded", "RequestTimeout",
              "RequestTimeoutException", "PriorRequestNotComplete", "InternalError",
              "ServiceUnavailable", "OperationAborted"}
REJECTED_CREDENTIALS = {"InvalidAccessKeyId", "SignatureDoesNotMatch", "ExpiredToken",
                        "InvalidToken", "TokenRefreshRequired", "InvalidClientTokenId"}
WRONG_REGION = {"PermanentRedirect", "AuthorizationHeaderMalformed", "IllegalLocationConstraintException",
                "301", "400"}
LOGGERS = ("botocore", "boto3", "s3transfer", "urllib3")


@dataclass(frozen=True)
class Location:
    """A parsed ``s3://bucket/key`` uri (key may be "" or end with "/")."""

    bucket: str
    key: str

    @property
    def uri(self) -> str:
        return f"s3://{self.bucket}/{self.key}"


# --------------------------------------------------------------------------------------------
# faults


@contextmanager
def translated(location: Location, action: str, target: str, passthrough: tuple[str, ...] = ()) -> Iterator[None]:
    """Turn boto3 / network faults into source errors; ``action`` is "list" or "read"."""
    import urllib3.exceptions as u3
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        yield
    except SourceError:
        raise
    except ClientError as exc:
        if _code(exc) in passthrough:
            raise
        raise client_fault(exc, location, action, target) from None
    except (BotoCoreError, u3.HTTPError, ConnectionError, TimeoutError) as exc:
        raise core_fault(exc, location, action, target) from None
    except OSError as exc:
        raise FatalSourceError(f"{location.uri}: could not write the local cache: "
                               f"{exc.strerror or type(exc).__name__}") from None


def attempts() -> int:
    """Requests botocore makes before it gives up: the first one and its retries."""
    return MAX_RETRIES + 1


def _code(exc) -> str:
    """The S3 error code of a ClientError (HEAD replies carry only the status, e.g. "403")."""
    return str(exc.response.get("Error", {}).get("Code", ""))


def _status(exc) -> int:
    return int(exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode") or 0)


def client_fault(exc, location: Location, action: str, target: str) -> SourceError:
    """A SourceError for an S3 error reply."""
    code, status = _code(exc), _status(exc)
    where = f"s3://{location.bucket}/{target}"
    if code in THROTTLING or status == 429 or status >= 500:
        return RetriableSourceError(f"{where}: S3 answered {code or status} after {attempts()} attempts "
                                    "(throttled or unavailable)")
    if code in ("NoSuchKey", "PreconditionFailed", "412"):
        return RetriableSourceError(f"{where}: the object changed or vanished since it was listed")
    if code in ("NoSuchBucket",):
        return InputError(location.uri, f"no such bucket {location.bucket!r}",
                          expected="an existing bucket (check the name, region and endpoint)")
    if code in REJECTED_CREDENTIALS:
        return FatalSourceError(f"{where}: the AWS credentials were rejected ({code}); check the "
                                "profile or environment that the AWS credential chain found")
    if code in ("AccessDenied", "403", "AllAccessDisabled", "AccountProblem") or status == 403:
        return FatalSourceError(access_denied(location, action, target))
    if code in WRONG_REGION or status == 301:
        return InputError(location.uri, f"S3 refused the request ({code or status}): the bucket is "
                          "probably in another region", column="region",
                          expected="region = the bucket's region in the source table")
    return FatalSourceError(f"{where}: S3 answered {code or status}")


def access_denied(location: Location, action: str, target: str) -> str:
    """The message for a 403: bucket, prefix and the permission that is missing."""
    bucket, prefix = location.bucket, location.key
    if action == "list":
        return (f"access denied listing s3://{bucket}/{prefix} (bucket {bucket!r}, prefix {prefix!r}): "
                f"the credentials need s3:ListBucket on arn:aws:s3:::{bucket}"
                + (f" with s3:prefix {prefix!r}" if prefix else "") + " (see docs/access.md)")
    scope = prefix if prefix else target
    return (f"access denied reading s3://{bucket}/{target} (bucket {bucket!r}, prefix {scope!r}): the "
            f"credentials need s3:GetObject on arn:aws:s3:::{bucket}/{scope}*"
            " (without s3:ListBucket S3 also answers 403 for a key that does not exist; see docs/access.md)")


def core_fault(exc, location: Location, action: str, target: str) -> SourceError:
    """A SourceError for a client-side fault: no credentials, bad parameters, or the network."""
    from botocore import exceptions as bx

    where = f"s3://{location.bucket}/{target}"
    if isinstance(exc, (bx.NoCredentialsError, bx.PartialCredentialsError, bx.CredentialRetrievalError,
                        bx.TokenRetrievalError, bx.SSOError)):
        return FatalSourceError(f"{where}: no usable AWS credentials ({type(exc).__name__}); costaudit "
                                "uses the AWS credential chain: environment, profile, SSO or role")
    if isinstance(exc, (bx.ParamValidationError, bx.InvalidRegionError)):
        return InputError(location.uri, f"invalid request: {redact(str(exc))}")
    if isinstance(exc, bx.NoRegionError):
        return InputError(location.uri, "no AWS region configured", column="region",
                          expected="region in the source table, AWS_REGION or a profile with one")
    return RetriableSourceError(f"{where}: {action} failed after {attempts()} attempts: "
                                f"{type(exc).__name__}: {redact(str(exc))}")


# --------------------------------------------------------------------------------------------
# no credential in any log line


def guard_logs() -> None:
    """Attach the redacting filter to every botocore / boto3 / s3transfer / urllib3 logger."""
    for name in ("botocore.auth", "botocore.endpoint", "botocore.hooks", "botocore.parsers",
                 "botocore.retryhandler", "botocore.httpsession", "urllib3.connectionpool", LOG_NAME):
        logging.getLogger(name)
    for name, logger in list(logging.root.manager.loggerDict.items()):
        if isinstance(logger, logging.Logger) and (name.split(".")[0] in LOGGERS or name == LOG_NAME):
            if REDACTING not in logger.filters:
                logger.addFilter(REDACTING)


guard_logs()  # at import too: any boto3 client made in this process logs masked from now on
