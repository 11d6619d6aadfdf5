"""A typed HTTP client of the BSO server: one method per route, errors as BSOServerError.

Shared by `BatchSizeOptimizer` (training scripts) and the trace simulator. Bodies are sent as
JSON with a Content-Type (Zeus's client omits it; the server accepts both).

One connection is kept open between requests. If the server drops it (a restart, or a server
that closed it after an error), the next request fails with a connection reset; requests whose
repetition changes nothing (registering a named job, reporting, ending a trial, reading a job)
are then sent once more on a fresh connection. Opening a trial and deleting a job are not
repeated: the first attempt may have reached the server.
"""

from __future__ import annotations

from typing import Any

import httpx

from basht.bso.config import check_token
from basht.bso.errors import BSOError, BSOServerError
from basht.bso.spec import (
    DELETE_JOB_URL,
    GET_NEXT_BATCH_SIZE_URL,
    POWER_PROFILE_URL,
    REGISTER_JOB_URL,
    REPORT_END_URL,
    REPORT_RESULT_URL,
    Assignment,
    CreatedJob,
    JobSpecFromClient,
    PowerLimitChoice,
    PowerProfile,
    ReportResponse,
    TrainingResult,
    TrialId,
)

# The kept-alive connection was closed or reset under a request.
_RESET = (httpx.ReadError, httpx.WriteError, httpx.RemoteProtocolError)


class BSOClient:
    """Talks to one BSO server; `token` is sent as a bearer token when given.

    `http` replaces the connection with a client of one's own, already pointed at the server
    (Starlette's in-process `TestClient`, for one); its owner closes it.
    """

    def __init__(
        self,
        server_url: str,
        token: str | None = None,
        timeout_s: float = 10.0,
        http: httpx.Client | None = None,
    ) -> None:
        if not server_url.startswith(("http://", "https://")):
            raise BSOError(f"BSO server URL {server_url!r}: expected http://host:port")
        if token:
            check_token(token)
        self.server_url = server_url.rstrip("/")
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self._own_http = http is None
        self._http = http or httpx.Client(
            base_url=self.server_url, headers=headers, timeout=timeout_s
        )

    def close(self) -> None:
        if self._own_http:
            self._http.close()

    def __enter__(self) -> BSOClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def register(self, spec: JobSpecFromClient) -> tuple[CreatedJob, bool]:
        """Register the job; True if it was created, False if the same spec already existed."""
        response = self._call(
            "POST",
            REGISTER_JOB_URL,
            json=spec.model_dump(mode="json"),
            # without a job_id every registration creates a job, so only a named one is repeated
            retry=spec.job_id is not None,
        )
        return CreatedJob.model_validate(response.json()), response.status_code == 201

    def next_trial(self, job_id: str) -> Assignment:
        response = self._call("GET", GET_NEXT_BATCH_SIZE_URL, params={"job_id": job_id})
        return Assignment.model_validate(response.json())

    def report_power_profile(self, profile: PowerProfile) -> PowerLimitChoice:
        response = self._call(
            "POST", POWER_PROFILE_URL, json=profile.model_dump(mode="json"), retry=True
        )
        return PowerLimitChoice.model_validate(response.json())

    def report(self, result: TrainingResult) -> ReportResponse:
        response = self._call(
            "POST", REPORT_RESULT_URL, json=result.model_dump(mode="json"), retry=True
        )
        return ReportResponse.model_validate(response.json())

    def end_trial(self, trial: TrialId) -> None:
        self._call("PATCH", REPORT_END_URL, json=trial.model_dump(mode="json"), retry=True)

    def delete_job(self, job_id: str) -> None:
        self._call("DELETE", DELETE_JOB_URL, params={"job_id": job_id})

    def job_state(self, job_id: str) -> dict[str, Any]:
        return self._call("GET", REGISTER_JOB_URL, params={"job_id": job_id}, retry=True).json()

    def _call(self, method: str, path: str, retry: bool = False, **kwargs: Any) -> httpx.Response:
        """Send one request; with `retry`, once more if the connection was reset under it (safe
        only for requests whose repetition changes nothing)."""
        try:
            try:
                response = self._http.request(method, path, **kwargs)
            except _RESET:
                if not retry:
                    raise
                response = self._http.request(method, path, **kwargs)  # on a new connection
        except httpx.HTTPError as err:
            raise BSOError(f"cannot reach the BSO server at {self.server_url}: {err}") from None
        if not 200 <= response.status_code < 300:
            raise BSOServerError(response.status_code, _message(response), f"{method} {path}")
        return response


def _message(response: httpx.Response) -> str:
    try:
        body = response.json()
    except ValueError:
        return response.text.strip()[:500]
    if isinstance(body, dict) and "message" in body:
        return str(body["message"])
    if isinstance(body, dict) and isinstance(body.get("detail"), list):
        return "; ".join(
            f"{'.'.join(str(p) for p in e.get('loc', [])[1:]) or 'body'}: {e.get('msg')}"
            for e in body["detail"]
        )
    return str(body)[:500]
