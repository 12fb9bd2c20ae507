package spiderstore_test

import (
	"bytes"
	"context"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"crawlq/internal/awstest"
	"crawlq/internal/dbtest"
	"crawlq/internal/spiderstore"
)

// TestS3Eggs keeps eggs under a prefix of a bucket (moto): the row holds the key, the object the
// bytes, and deleting the version deletes the object.
func TestS3Eggs(t *testing.T) {
	awstest.Moto(t)
	ctx := context.Background()
	cfg := awstest.Config(t)
	cl := s3.NewFromConfig(cfg, func(o *s3.Options) { o.UsePathStyle = true })
	if _, err := cl.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String("items")}); err != nil {
		t.Fatal(err)
	}
	st, err := spiderstore.New(spiderstore.Config{Pool: dbtest.Pool(t), Lister: spiderstore.StaticLister{},
		Eggs: spiderstore.S3Eggs{Client: cl, Bucket: "items", Prefix: "eggs/"}})
	if err != nil {
		t.Fatal(err)
	}
	e := egg(t, "[scrapy]\nsettings = shop.settings\n", map[string]string{"shop/spiders/a.py": "class A:\n    name = 'alpha'\n"})
	if _, err := st.AddVersion(ctx, "shop", "r1", e); err != nil {
		t.Fatal(err)
	}
	obj, err := cl.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("items"), Key: aws.String("eggs/shop/r1.egg")})
	if err != nil {
		t.Fatalf("egg object: %v", err)
	}
	obj.Body.Close()
	got, err := st.Egg(ctx, "shop", "r1")
	if err != nil || !bytes.Equal(got, e) {
		t.Fatalf("egg from S3: %v", err)
	}
	if err := st.DeleteProject(ctx, "shop", "r1"); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String("items"), Key: aws.String("eggs/shop/r1.egg")}); err == nil {
		t.Fatal("the egg object outlived its version")
	}
}
