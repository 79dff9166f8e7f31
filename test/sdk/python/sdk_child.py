# An application using one official Python cloud SDK the way applications do: the default
# credential chain, configured by nothing but the environment. Same line protocol as
# ../node/sdk-child.ts: {"op": "versions" | "credentials" | "advance", "seconds": N, "profile": P (AWS)}.
import json
import sys
from importlib.metadata import version

import sitecustomize  # the redirection, already active; imported for advance_clock

cloud = sys.argv[1]
SCOPE_AZURE = "https://management.azure.com/.default"
SCOPE_GCP = "https://www.googleapis.com/auth/cloud-platform"

if cloud == "aws":
    import boto3

    # One session for the process (per profile), as an application keeps one; it caches and refreshes.
    sessions = {}
    packages = ["boto3", "botocore"]

    def get_credentials(profile=None):
        if profile not in sessions:
            sessions[profile] = boto3.Session() if profile is None else boto3.Session(profile_name=profile)
        credentials = sessions[profile].get_credentials()
        if credentials is None:
            raise RuntimeError("boto3 found no credentials")
        frozen = credentials.get_frozen_credentials()
        return {"accessKeyId": frozen.access_key, "secretAccessKey": frozen.secret_key, "sessionToken": frozen.token, "method": credentials.method}

elif cloud == "azure":
    from azure.identity import DefaultAzureCredential

    credential = DefaultAzureCredential()
    packages = ["azure-identity", "azure-core", "msal"]

    def get_credentials(profile=None):
        token = credential.get_token(SCOPE_AZURE)
        return {"token": token.token, "expiresOnTimestamp": token.expires_on * 1000}

elif cloud == "gcp":
    import google.auth
    import google.auth.transport.requests

    packages = ["google-auth", "requests"]
    state = {}

    def get_credentials(profile=None):
        # google.auth.default() already exchanges tokens (it looks up the project), so it runs
        # on the first request, where a failure is reported like any other.
        if "credentials" not in state:
            state["credentials"], state["project"] = google.auth.default(scopes=[SCOPE_GCP])
        credentials = state["credentials"]
        if not credentials.valid:
            credentials.refresh(google.auth.transport.requests.Request())
        return {"token": credentials.token, "project": state["project"], "client": type(credentials).__module__}

else:
    raise SystemExit("usage: sdk_child.py aws|azure|gcp")


def describe_error(err):
    answer = {"name": type(err).__name__, "message": str(err)}
    response = getattr(err, "response", None)
    if isinstance(response, dict) and "Error" in response:  # botocore ClientError
        answer["code"] = response["Error"].get("Code")
        answer["status"] = response.get("ResponseMetadata", {}).get("HTTPStatusCode")
    status = getattr(err, "status_code", None)  # azure-core HttpResponseError
    if status is not None:
        answer["status"] = status
    return answer


for line in sys.stdin:
    request = json.loads(line)
    try:
        if request["op"] == "versions":
            answer = {"ok": True, "versions": {name: version(name) for name in packages}}
        elif request["op"] == "credentials":
            answer = {"ok": True, **get_credentials(request.get("profile"))}
        elif request["op"] == "advance":
            sitecustomize.advance_clock(request["seconds"])
            answer = {"ok": True}
        else:
            answer = {"ok": False, "error": {"message": "unknown op %s" % request["op"]}}
    except Exception as err:  # every failure is an answer; the test judges it
        answer = {"ok": False, "error": describe_error(err)}
    sys.stdout.write(json.dumps(answer) + "\n")
    sys.stdout.flush()
