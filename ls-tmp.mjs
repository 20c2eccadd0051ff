import { S3Client, ListObjectsV2Command } from "@aws-sdk/client-s3";
import { GlueClient, GetTablesCommand, GetPartitionsCommand } from "@aws-sdk/client-glue";
const e = "http://127.0.0.1:5055";
const s3 = new S3Client({ endpoint: e, forcePathStyle: true, region: "us-east-1" });
const r = await s3.send(new ListObjectsV2Command({ Bucket: "lake" }));
for (const o of r.Contents ?? []) console.log(o.Key, o.Size);
const glue = new GlueClient({ endpoint: e, region: "us-east-1" });
for (const db of ["analytics", "deadletters"]) {
  const t = await glue.send(new GetTablesCommand({ DatabaseName: db })).catch((x) => ({ TableList: [], err: x.name }));
  for (const tb of t.TableList) {
    const p = await glue.send(new GetPartitionsCommand({ DatabaseName: db, TableName: tb.Name }));
    console.log(db, tb.Name, tb.StorageDescriptor?.Location, tb.PartitionKeys?.map((k) => k.Name).join(","), "partitions", p.Partitions.length, p.Partitions[0]?.StorageDescriptor?.Location, JSON.stringify(p.Partitions[0]?.Parameters));
  }
}
